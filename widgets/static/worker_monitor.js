// WorkerMonitor front end: one card per group of figures; the kernel computes every figure.

function render({ model, el }) {
  el.classList.add("dn-widget", "dn-wm");
  const title = h("span", { class: "dn-title" });
  const state = h("span", { class: "dn-chip", role: "status" });
  const live = h("span", { class: "dn-live", "aria-live": "polite" });
  const head = h("div", { class: "dn-head" }, title, state, live);
  const types = h("div", { class: "dn-note" });
  const error = h("div", { class: "dn-error", role: "alert", hidden: true });
  const cards = h("div", { class: "dn-wm-cards" });
  el.append(head, types, error, cards);

  function renderHead() {
    title.textContent = model.get("title");
    const running = model.get("running");
    state.textContent = running ? "polling" : "stopped";
    state.dataset.state = running ? "running" : "stopped";
    live.textContent = model.get("live") ? "● live" : "";
    const wf = model.get("workflow_types");
    const act = model.get("activity_types");
    types.textContent = [
      wf.length ? `workflows: ${wf.join(", ")}` : "",
      act.length ? `activities: ${act.join(", ")}` : "",
    ].filter(Boolean).join(" · ");
    const e = model.get("error");
    error.hidden = !e;
    error.textContent = e;
  }

  function renderRows() {
    const groups = model.get("groups");
    const byGroup = new Map(Object.keys(groups).map((g) => [g, []]));
    for (const row of model.get("rows")) {
      if (!byGroup.has(row.group)) byGroup.set(row.group, []);
      byGroup.get(row.group).push(row);
    }
    const nodes = [];
    for (const [group, rows] of byGroup) {
      if (!rows.length) continue;
      const card = h("section", { class: "dn-wm-card", "aria-label": groups[group] || group },
        h("h4", { class: "dn-wm-group", text: groups[group] || group }));
      for (const row of rows) {
        const line = h("div", { class: `dn-wm-row${row.level ? ` dn-wm-${row.level}` : ""}`, "data-key": row.key },
          h("span", { class: "dn-wm-label", text: row.label }),
          h("span", { class: "dn-wm-value", text: row.text }),
          h("span", { class: "dn-wm-detail", text: row.detail }));
        card.append(line);
        if (row.fraction !== null && row.fraction !== undefined) {
          const pct = Math.max(0, Math.min(100, row.fraction * 100));
          card.append(h("div", {
            class: "dn-wm-bar", role: "meter", "aria-label": `${row.label} in use`,
            "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": pct.toFixed(0),
          }, h("span", { style: `width:${pct}%` })));
        }
      }
      nodes.push(card);
    }
    cards.replaceChildren(...nodes);
  }

  const heads = ["title", "running", "live", "workflow_types", "activity_types", "error"];
  for (const name of heads) model.on(`change:${name}`, renderHead);
  model.on("change:rows", renderRows);
  model.on("change:groups", renderRows);
  renderHead();
  renderRows();
  tell(model, true); // the kernel reads nothing for a live refresh while no view is open
  return () => {
    for (const name of heads) model.off(`change:${name}`, renderHead);
    model.off("change:rows", renderRows);
    model.off("change:groups", renderRows);
    tell(model, false);
  };
}

export default { render };
