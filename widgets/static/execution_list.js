// ExecutionList front end: filter box (attribute names suggested as you type: suggest.js,
// in front of this module), status chips with counts, one page of runs with their search
// attributes as chips, pager. Paging tokens stay in the kernel: the buttons only ask for
// the next or previous page. Every value is text (textContent), never markup.

const COLOURS = {
  running: "#1971c2", completed: "#2b8a3e", failed: "#e03131", canceled: "#868e96",
  terminated: "#495057", continued_as_new: "#7048e8", timed_out: "#c2255c",
};
const HEADERS = ["status", "workflow id", "type", "run id", "task queue", "started (UTC)", "took", "events", "search attributes"];

function label(status) {
  return status.replaceAll("_", " ");
}

function render({ model, el }) {
  el.classList.add("dn-widget", "dn-xl");
  const input = h("input", {
    type: "search", class: "dn-xl-filter", spellcheck: "false",
    placeholder: "CustomerId = 'c1' AND ExecutionStatus = 'Running'",
    "aria-label": "List filter (press Enter to apply; attribute names are suggested as you type)",
  });
  const combo = h("span", { class: "dn-xl-combo" }, input);
  const apply = h("button", { type: "button", text: "Filter" });
  const live = h("span", { class: "dn-live", "aria-live": "polite" });
  const head = h("div", { class: "dn-head" }, combo, apply, live);
  // Before the Enter handler below: Enter on a suggestion highlighted with the arrow keys
  // takes it instead of filtering (with none highlighted, Enter filters).
  attachSuggestions(input, combo, () => model.get("attributes"), { cls: "dn-suggest" });
  const chips = h("div", { class: "dn-xl-chips", role: "group", "aria-label": "Counts by status" });
  const error = h("div", { class: "dn-error", role: "alert", hidden: true });
  // A table: the header row and the runs each in a rowgroup; a run's row is focusable
  // (Enter opens it, arrow keys move between runs) and the run shown is aria-current.
  const colhead = h("div", { class: "dn-xl-row dn-colhead", role: "row" },
    ...HEADERS.map((t) => h("span", { class: "dn-c", role: "columnheader", text: t })));
  const body = h("div", { class: "dn-xl-body", role: "rowgroup" });
  const table = h("div", { class: "dn-xl-table", role: "table", "aria-label": "Runs" },
    h("div", { role: "rowgroup" }, colhead), body);
  const prev = h("button", { type: "button", text: "‹ previous", "aria-label": "Previous page" });
  const next = h("button", { type: "button", text: "next ›", "aria-label": "Next page" });
  const pageLabel = h("span", { class: "dn-counts" });
  const pager = h("div", { class: "dn-xl-pager" }, prev, pageLabel, next);
  const note = h("div", { class: "dn-note", text: "Click a run to open its history below." });
  el.append(head, chips, error, table, pager, note);

  function submit() {
    model.send({ type: "query", query: input.value });
  }
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") {
      ev.preventDefault();
      submit();
    }
  });
  apply.addEventListener("click", submit);
  prev.addEventListener("click", () => model.send({ type: "previous" }));
  next.addEventListener("click", () => model.send({ type: "next" }));

  function renderQuery() {
    if (document.activeElement !== input) input.value = model.get("query");
  }

  function chip(status, text, pressed) {
    const b = h("button", {
      type: "button", class: "dn-xl-chip", "data-status": status || "all",
      "aria-pressed": String(pressed),
      title: status ? `Only ${label(status)} runs` : "Every status",
    },
    h("span", { class: "dn-swatch", style: `background:${status ? COLOURS[status] || "#868e96" : "#adb5bd"}`, "aria-hidden": "true" }),
    text);
    b.addEventListener("click", () => model.send({ type: "status", status: pressed ? null : status }));
    return b;
  }

  function renderCounts() {
    const counts = model.get("counts");
    const current = model.get("status") || null;
    const failed = model.get("counts_error");
    const nodes = [chip(null, failed ? "all" : `all ${model.get("count_total")}`, current === null)];
    for (const [status, n] of Object.entries(counts)) {
      nodes.push(chip(status, `${label(status)} ${n}`, status === current));
    }
    // The chip pressed stays visible even when none of the filter's runs has its status.
    if (current && !(current in counts)) nodes.push(chip(current, `${label(current)} ${failed ? "" : 0}`.trim(), true));
    if (failed) nodes.push(h("span", { class: "dn-note dn-xl-count-error", text: failed }));
    chips.replaceChildren(...nodes);
  }

  // The run's search attributes, one chip each: "CustomerId=abc" (text, never markup).
  function attributeChips(attrs) {
    return Object.entries(attrs || {}).map(([name, value]) =>
      h("span", { class: "dn-sa", title: `${name} = ${value}`, text: `${name}=${value}` }));
  }

  function moveFocus(from, ev) {
    const rows = [...body.querySelectorAll('[role="row"][data-run-id]')];
    const at = rows.indexOf(from);
    const to = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: rows.length - 1 }[ev.key];
    if (to === undefined) return false;
    ev.preventDefault();
    if (rows[to]) rows[to].focus();
    return true;
  }

  function renderRows() {
    const rows = model.get("rows");
    const sel = model.get("selected") || {};
    // Rebuilding the rows must not take the keyboard focus away from the row that has it.
    const active = document.activeElement;
    const focused = active && body.contains(active) ? active.closest("[data-run-id]") : null;
    const focusedRun = focused ? focused.dataset.runId : null;
    const scroll = body.scrollTop;
    if (!rows.length) {
      body.replaceChildren(h("div", { role: "row" },
        h("div", { class: "dn-note dn-xl-empty", role: "cell", "aria-colspan": HEADERS.length, text: "No runs match." })));
      return;
    }
    body.replaceChildren(...rows.map((row) => {
      const selected = sel.run_id === row.run_id;
      const node = h("div", {
        class: `dn-xl-row${row.status === "failed" || row.status === "timed_out" ? " dn-failed" : ""}${selected ? " dn-selected" : ""}`,
        role: "row", tabindex: "0", "aria-current": selected ? "true" : null, "data-run-id": row.run_id,
      },
      h("span", { class: "dn-c", role: "cell" }, h("span", { class: "dn-chip", style: `background:${row.status_colour}`, text: label(row.status) })),
      h("span", { class: "dn-c dn-xl-id", role: "cell", text: row.id, title: row.id }),
      h("span", { class: "dn-c", role: "cell", text: row.workflow_type }),
      // A run id by its end: UUIDv7 run ids started together share their first characters.
      h("span", { class: "dn-c dn-id", role: "cell", text: row.run_id_short || row.run_id, title: row.run_id }),
      h("span", { class: "dn-c", role: "cell", text: row.task_queue }),
      h("span", { class: "dn-c dn-off", role: "cell", text: row.started, title: row.closed ? `closed ${row.closed}` : "open" }),
      h("span", { class: "dn-c dn-dur", role: "cell", text: row.took }),
      h("span", { class: "dn-c dn-att", role: "cell", text: row.history_length }),
      h("span", { class: "dn-c dn-xl-attrs", role: "cell" }, ...attributeChips(row.search_attributes)));
      const open = () => {
        model.set("selected", { id: row.id, run_id: row.run_id });
        model.save_changes();
        renderRows();
      };
      node.addEventListener("click", open);
      node.addEventListener("keydown", (ev) => {
        if (ev.key === "Enter" || ev.key === " ") {
          ev.preventDefault();
          open();
        } else {
          moveFocus(node, ev);
        }
      });
      return node;
    }));
    body.scrollTop = scroll;
    if (focusedRun !== null) {
      const again = [...body.children].find((n) => n.dataset.runId === focusedRun);
      if (again) again.focus({ preventScroll: true });
    }
  }

  function renderState() {
    const e = model.get("error");
    error.hidden = !e;
    error.textContent = e;
    live.textContent = model.get("live") ? "● live" : "";
    prev.disabled = !model.get("has_previous");
    next.disabled = !model.get("has_next");
    pageLabel.textContent = `page ${model.get("page")}`;
  }

  const handlers = {
    query: renderQuery,
    counts: renderCounts, counts_error: renderCounts, count_total: renderCounts, status: renderCounts,
    rows: renderRows, selected: renderRows,
    error: renderState, live: renderState, has_previous: renderState, has_next: renderState, page: renderState,
  };
  for (const [name, fn] of Object.entries(handlers)) model.on(`change:${name}`, fn);
  renderQuery();
  renderCounts();
  renderRows();
  renderState();
  tell(model, true); // the kernel reads nothing for a live refresh while no view is open
  return () => {
    for (const [name, fn] of Object.entries(handlers)) model.off(`change:${name}`, fn);
    tell(model, false);
  };
}

export default { render };
