// HistoryView front end: a virtualised table over the rows the kernel sends a window at a time.
const ROW_H = 26; // px: every row has the same height, so scrolling needs no measuring
const VISIBLE = 14; // rows in view

function seconds(s) {
  if (s === null || s === undefined) return "";
  if (s < 1) return `+${(s * 1000).toFixed(0)} ms`;
  if (s < 120) return `+${s.toFixed(s < 10 ? 2 : 1)} s`;
  if (s < 7200) return `+${(s / 60).toFixed(1)} min`;
  if (s < 172800) return `+${(s / 3600).toFixed(1)} h`;
  return `+${(s / 86400).toFixed(1)} d`;
}

function duration(row) {
  if (row.end === null || row.end === undefined) return "";
  const d = row.end - row.start;
  return d <= 0 ? "" : seconds(d).slice(1);
}

// The summary cell: the user's summary (plain text, never markup) before the kernel's line.
function summaryCell(row) {
  const cell = h("span", { class: "dn-c dn-sum", title: row.user_summary || null });
  if (row.user_summary) {
    cell.append(h("span", { class: "dn-usum", text: row.user_summary }));
    if (row.summary) cell.append(" · ");
  }
  if (row.summary) cell.append(row.summary);
  return cell;
}

function cells(row, mode) {
  if (mode === "full") {
    return [
      h("span", { class: "dn-c dn-id", text: row.event_id }),
      h("span", { class: "dn-c dn-off", text: seconds(row.offset) }),
      h("span", { class: "dn-c dn-type" },
        h("span", { class: "dn-swatch", style: `background:${row.colour}`, "aria-hidden": "true" }),
        row.event_type),
      summaryCell(row),
    ];
  }
  return [
    h("span", { class: "dn-c dn-kind" },
      h("span", { class: "dn-swatch", style: `background:${row.colour}`, "aria-hidden": "true" }),
      row.kind.replaceAll("_", " ")),
    h("span", { class: "dn-c dn-label", text: row.label }),
    h("span", { class: "dn-c dn-status" },
      h("span", { class: "dn-chip", style: `background:${row.status_colour}`, text: row.status.replaceAll("_", " ") })),
    h("span", { class: "dn-c dn-att", text: row.attempts ? `×${row.attempts}` : "" }),
    h("span", { class: "dn-c dn-off", text: seconds(row.start) }),
    h("span", { class: "dn-c dn-dur", text: duration(row) }),
    summaryCell(row),
  ];
}

const HEADERS = {
  full: ["#", "at", "event", "summary"],
  compact: ["kind", "name", "status", "attempts", "at", "took", "summary"],
};

const HEADER_TRAITS = ["title", "run_summary", "run_details", "status", "live", "event_count",
  "failure_count", "mode", "error"];

let views = 0;

function render({ model, el }) {
  const uid = `dn-history-${++views}`;
  el.classList.add("dn-widget", "dn-history");
  const title = h("span", { class: "dn-title" });
  const status = h("span", { class: "dn-chip dn-run-status", role: "status" });
  const live = h("span", { class: "dn-live", "aria-live": "polite" });
  const counts = h("span", { class: "dn-counts" });
  const tabs = h("span", { class: "dn-tabs", role: "group", "aria-label": "History view" });
  const tabButtons = {};
  for (const mode of ["compact", "full"]) {
    const b = h("button", { type: "button", class: "dn-tab", "data-mode": mode, text: mode });
    b.addEventListener("click", () => {
      model.set("mode", mode);
      model.save_changes();
    });
    tabButtons[mode] = b;
    tabs.append(b);
  }
  const header = h("div", { class: "dn-head" }, title, status, live, counts, tabs);
  // The run's static summary and details: the user's text, shown as text.
  const runSummary = h("div", { class: "dn-run-summary", hidden: true });
  const runDetailsText = h("div", { class: "dn-run-details-text" });
  const runDetails = h("details", { class: "dn-run-details", hidden: true },
    h("summary", { text: "details" }), runDetailsText);
  const colhead = h("div", { class: "dn-row dn-colhead", role: "row" });
  const body = h("div", { class: "dn-scroll", tabindex: "0", role: "rowgroup",
    "aria-label": "Events (arrow keys move the selection)" });
  const table = h("div", { class: "dn-table", role: "table", "aria-label": "Event history" },
    h("div", { role: "rowgroup" }, colhead), body);
  const spacer = h("div", { class: "dn-spacer" });
  body.append(spacer);
  const detail = h("pre", { class: "dn-detail", "aria-label": "Selected row's attributes",
    tabindex: "0", hidden: true });
  const error = h("div", { class: "dn-error", role: "alert", hidden: true });
  el.append(header, runSummary, runDetails, error, table, detail);

  let follow = true; // stick to the bottom while the run grows

  function renderHeader() {
    title.textContent = model.get("title");
    runSummary.textContent = model.get("run_summary");
    runSummary.hidden = !model.get("run_summary");
    runDetailsText.textContent = model.get("run_details");
    runDetails.hidden = !model.get("run_details");
    const st = model.get("status");
    status.textContent = st.replaceAll("_", " ");
    status.dataset.status = st;
    live.textContent = model.get("live") ? "● live" : "";
    const f = model.get("failure_count");
    counts.textContent = `${model.get("event_count")} events` + (f ? ` · ${f} failure${f === 1 ? "" : "s"}` : "");
    const mode = model.get("mode");
    for (const [m, b] of Object.entries(tabButtons)) b.setAttribute("aria-pressed", String(m === mode));
    colhead.replaceChildren(...HEADERS[mode].map((t) => h("span", { class: "dn-c", role: "columnheader", text: t })));
    colhead.dataset.mode = mode;
    const e = model.get("error");
    error.hidden = !e;
    error.textContent = e;
  }

  function renderRows() {
    const mode = model.get("mode");
    const total = model.get("total");
    const start = model.get("rows_start"); // the window these rows were computed for
    const rows = model.get("rows");
    const selected = model.get("selected");
    spacer.style.height = `${total * ROW_H}px`;
    // As tall as the rows (3 to VISIBLE of them), so a short history takes little room.
    body.style.height = `${Math.max(3, Math.min(VISIBLE, total)) * ROW_H + 2}px`;
    const nodes = rows.map((row, i) => {
      const index = start + i;
      const node = h("div", {
        class: `dn-row${row.failed ? " dn-failed" : ""}${index === selected ? " dn-selected" : ""}`,
        role: "row", tabindex: "-1", "data-index": index, "aria-selected": String(index === selected),
        style: `top:${index * ROW_H}px`, "data-mode": mode,
      }, ...cells(row, mode).map((c) => { c.setAttribute("role", "cell"); return c; }));
      if (index === selected) node.id = `${uid}-selected`;
      node.addEventListener("click", () => select(index));
      return node;
    });
    body.replaceChildren(spacer, ...nodes);
    if (selected >= 0) body.setAttribute("aria-activedescendant", `${uid}-selected`);
    else body.removeAttribute("aria-activedescendant");
    if (follow && model.get("live")) body.scrollTop = body.scrollHeight;
  }

  function renderDetail() {
    const text = model.get("detail");
    detail.hidden = !text;
    detail.textContent = text || "";
  }

  function select(index) {
    model.set("selected", index); // the kernel answers with that row's detail
    model.save_changes();
    renderRows();
  }

  function onScroll() {
    const first = Math.floor(body.scrollTop / ROW_H);
    const size = model.get("window_size");
    const start = model.get("window_start");
    follow = body.scrollTop + body.clientHeight >= body.scrollHeight - ROW_H;
    if (first < start || first + VISIBLE > start + size) {
      model.set("window_start", Math.max(0, first - Math.floor(size / 4)));
      model.save_changes();
    }
  }

  function onKey(ev) {
    const total = model.get("total");
    let index = model.get("selected");
    if (ev.key === "ArrowDown") index = Math.min(total - 1, index + 1);
    else if (ev.key === "ArrowUp") index = Math.max(0, index - 1);
    else if (ev.key === "Home") index = 0;
    else if (ev.key === "End") index = total - 1;
    else return;
    ev.preventDefault();
    body.scrollTop = Math.max(0, (index - 3) * ROW_H);
    select(index);
  }

  body.addEventListener("scroll", onScroll);
  body.addEventListener("keydown", onKey);
  const onHeader = () => renderHeader();
  const onRows = () => renderRows();
  for (const name of HEADER_TRAITS) {
    model.on(`change:${name}`, onHeader);
  }
  for (const name of ["rows", "total", "selected"]) model.on(`change:${name}`, onRows);
  model.on("change:detail", renderDetail);
  renderHeader();
  renderRows();
  renderDetail();
  tell(model, true); // the kernel refreshes only while someone looks
  return () => {
    tell(model, false);
    model.off("change:detail", renderDetail);
    for (const name of HEADER_TRAITS) {
      model.off(`change:${name}`, onHeader);
    }
    for (const name of ["rows", "total", "selected"]) model.off(`change:${name}`, onRows);
  };
}

export default { render };
