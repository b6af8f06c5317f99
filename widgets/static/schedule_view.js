// ScheduleView front end: the schedule's action times on a time axis, its runs as bars,
// counters, a legend and the recent actions; the kernel computes everything
// (widgets/schedule_view.py). Every piece of data is set as text, never as markup.
const SVG = "http://www.w3.org/2000/svg";
const LABEL_W = 110;
const AXIS_H = 22;
const LANE_H = 30;
const R = 6; // px: the size of a mark

function s(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

// The shape of one kind of mark, centred on (x, y).
function shape(kind, x, y, colour) {
  const g = s("g", { class: "dn-sv-shape" });
  if (kind === "started") {
    g.append(s("circle", { cx: x, cy: y, r: R, fill: colour, stroke: "#fff", "stroke-width": 1 }));
  } else if (kind === "skipped") {
    const d = R - 1;
    g.append(s("line", { x1: x - d, y1: y - d, x2: x + d, y2: y + d, stroke: colour, "stroke-width": 3, "stroke-linecap": "round" }));
    g.append(s("line", { x1: x - d, y1: y + d, x2: x + d, y2: y - d, stroke: colour, "stroke-width": 3, "stroke-linecap": "round" }));
  } else if (kind === "missed") {
    g.append(s("rect", { x: x - R + 1, y: y - R + 1, width: 2 * R - 2, height: 2 * R - 2, fill: "none", stroke: colour, "stroke-width": 2.5 }));
  } else if (kind === "waiting") {
    g.append(s("circle", { cx: x, cy: y, r: R, fill: "none", stroke: colour, "stroke-width": 2.5, "stroke-dasharray": "3 2" }));
  } else if (kind === "ended_other") {
    g.append(s("path", { d: `M${x - R},${y + R - 1} L${x},${y - R} L${x + R},${y + R - 1} Z`, fill: colour }));
  } else if (kind === "not_taken") {
    g.append(s("path", { d: `M${x},${y - R} L${x + R},${y} L${x},${y + R} L${x - R},${y} Z`, fill: "none", stroke: colour, "stroke-width": 2 }));
  } else {
    g.append(s("circle", { cx: x, cy: y, r: R - 1, fill: "none", stroke: colour, "stroke-width": 2 }));
  }
  return g;
}

function render({ model, el }) {
  el.classList.add("dn-widget", "dn-sv");
  const title = h("span", { class: "dn-title" });
  const state = h("span", { class: "dn-chip dn-sv-state", role: "status" });
  const live = h("span", { class: "dn-live", "aria-live": "polite" });
  const head = h("div", { class: "dn-head" }, title, state, live);
  const policy = h("div", { class: "dn-note dn-sv-policy" });
  const note = h("div", { class: "dn-sv-note", hidden: true });
  const error = h("div", { class: "dn-error", role: "alert", hidden: true });
  const invalid = h("div", { class: "dn-error dn-sv-invalid", hidden: true });
  const counters = h("div", { class: "dn-sv-counters" });
  const holder = h("div", { class: "dn-sv-plot" });
  const legend = h("div", { class: "dn-sv-legend", "aria-label": "What the marks mean" });
  const earlier = h("div", { class: "dn-note dn-sv-earlier" });
  const table = h("div", { class: "dn-sv-table", role: "table", "aria-label": "Recent action times" });
  el.append(head, policy, note, error, invalid, counters, holder, legend, earlier, table);

  function drawHead(data) {
    title.textContent = model.get("title");
    const paused = Boolean(data.paused);
    state.textContent = paused ? "paused" : "active";
    state.dataset.state = paused ? "paused" : "active";
    live.textContent = model.get("live") ? "● live" : "";
    const p = data.policy || {};
    policy.textContent = [
      data.workflow_type, data.spec, p.overlap ? `overlap ${p.overlap}` : "",
      p.catchup_window ? `catch-up window ${p.catchup_window}` : "",
      p.pause_on_failure ? `pause on failure ${p.pause_on_failure}` : "",
    ].filter(Boolean).join(" · ");
    note.hidden = !data.note;
    note.textContent = data.note ? `note: ${data.note}` : "";
    note.classList.toggle("dn-sv-paused-note", paused);
    const e = model.get("error");
    error.hidden = !e;
    error.textContent = e;
    invalid.hidden = !data.invalid;
    invalid.textContent = data.invalid ? `the schedule cannot be used: ${data.invalid}` : "";
  }

  function drawCounters(data) {
    const c = data.counters || {};
    const items = [
      ["num_actions", "taken", "started", "actions taken (runs started)"],
      ["num_actions_skipped_overlap", "skipped (overlap)", "skipped", "skipped: a run was still open"],
      ["num_actions_missed_catchup_window", "missed (catch-up)", "missed", "missed: later than the catch-up window"],
      ["running_actions", "running", "running", "runs started by the schedule, still open"],
      ["buffered_actions", "buffered", "waiting", "starts waiting for the open run to close"],
    ];
    counters.replaceChildren(...items.map(([key, label, kind, help]) => {
      const n = c[key] ?? 0;
      return h("span", { class: "dn-sv-counter", "data-key": key, "data-kind": kind, title: help,
        "data-zero": n === 0 ? "true" : null },
        h("strong", { text: String(n) }), ` ${label}`);
    }));
  }

  function drawPlot(data) {
    const marks = data.marks || [];
    const runs = data.runs || [];
    const width = Math.max(480, el.clientWidth || 900);
    const plotW = width - LABEL_W - 16;
    const start = data.start ?? 0;
    const end = Math.max(data.end ?? 1, start + 1);
    const x = (t) => LABEL_W + ((t - start) / (end - start)) * plotW;
    const height = AXIS_H + 2 * LANE_H + 6;
    const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": `Action times of schedule ${data.schedule_id || ""}: ${marks.length} marks` });
    svg.style.height = `${height}px`;
    const axis = s("g", { class: "dn-axis" });
    for (const [at, text] of data.ticks || []) {
      const tx = x(at);
      axis.append(s("line", { x1: tx, x2: tx, y1: AXIS_H - 4, y2: height, class: "dn-sv-grid" }));
      axis.append(s("text", { x: tx, y: AXIS_H - 8, "text-anchor": "middle" }, text));
    }
    svg.append(axis);
    const yMarks = AXIS_H + LANE_H / 2;
    const yRuns = AXIS_H + LANE_H + LANE_H / 2;
    svg.append(s("text", { x: 4, y: yMarks + 4, class: "dn-lane-label" }, "action times"));
    svg.append(s("text", { x: 4, y: yRuns + 4, class: "dn-lane-label" }, "runs"));
    svg.append(s("line", { x1: LABEL_W, x2: width - 8, y1: yMarks, y2: yMarks, class: "dn-sv-lane" }));
    const bars = s("g", { class: "dn-sv-runs" });
    for (const run of runs) {
      const x1 = x(run.start);
      const x2 = Math.max(x(run.end ?? data.now), x1 + 4);
      const g = s("g", { class: "dn-sv-run", "data-status": run.status, "data-run-id": run.run_id });
      g.append(s("title", {}, run.text));
      g.append(s("rect", { x: x1, y: yRuns - 7, width: x2 - x1, height: 14, rx: 3, fill: run.colour,
        "fill-opacity": run.end === null || run.end === undefined ? 0.55 : 0.85 }));
      bars.append(g);
    }
    svg.append(bars);
    const group = s("g", { class: "dn-sv-marks" });
    for (const mark of marks) {
      const g = s("g", { class: "dn-sv-mark", "data-kind": mark.kind, "data-outcome": mark.outcome,
        "data-status": mark.status || "", tabindex: 0 });
      g.append(s("title", {}, mark.text));
      g.append(shape(mark.kind, x(mark.at), yMarks, mark.colour));
      group.append(g);
    }
    svg.append(group);
    if (data.now !== undefined && data.now !== null) {
      const nx = x(data.now);
      const now = s("line", { x1: nx, x2: nx, y1: AXIS_H - 4, y2: height, class: "dn-now" });
      now.append(s("title", {}, "now"));
      svg.append(now);
    }
    holder.replaceChildren(svg);
  }

  function drawLegend(data) {
    const kinds = data.kinds || {};
    const present = new Set((data.marks || []).map((m) => m.kind));
    legend.replaceChildren(...Object.entries(kinds).map(([kind, k]) => {
      const icon = s("svg", { width: 16, height: 16, viewBox: "0 0 16 16", "aria-hidden": "true" });
      icon.append(shape(kind, 8, 8, k.colour));
      return h("span", { class: "dn-sv-key", "data-kind": kind, title: k.help,
        "data-present": present.has(kind) ? "true" : null }, icon, h("span", { text: k.label }));
    }));
    legend.append(h("span", { class: "dn-sv-key dn-sv-key-help", text: "hover a mark for what became of it" }));
  }

  function drawTable(data) {
    const logged = (data.marks || []).filter((m) => m.id !== null && m.id !== undefined).reverse();
    const kinds = data.kinds || {};
    const head = h("div", { class: "dn-sv-row dn-colhead", role: "row" },
      ...["action time (UTC)", "what became of it", "run", "detail"].map((t) => h("span", { role: "columnheader", text: t })));
    const rows = logged.map((m) => h("div", {
      class: `dn-sv-row${m.kind === "skipped" || m.kind === "missed" ? " dn-sv-not" : ""}`,
      role: "row", "data-kind": m.kind, "data-outcome": m.outcome,
    },
      h("span", { class: "dn-c", text: m.time }),
      h("span", { class: "dn-c" }, h("span", { class: "dn-swatch", style: `background:${m.colour}` }),
        (kinds[m.kind] || {}).label || m.outcome, m.source && m.source !== "spec" ? ` (${m.source})` : ""),
      h("span", { class: "dn-c", title: m.run_id || "", text: m.workflow_id
        ? `${m.status ? `${m.status.replace(/_/g, " ")} · ` : ""}${m.workflow_id}` : "" }),
      h("span", { class: "dn-c dn-sv-detail", title: m.detail || "", text: m.detail || "" })));
    if (!rows.length) rows.push(h("div", { class: "dn-sv-row", text: "no action time reached yet" }));
    table.replaceChildren(head, ...rows);
    const more = (data.logged || 0) - (data.shown || 0);
    const counts = Object.entries(data.by_outcome || {}).map(([o, n]) => `${n} ${o.replace(/_/g, " ")}`).join(", ");
    earlier.textContent = `${data.logged || 0} action time${data.logged === 1 ? "" : "s"} in the log${counts ? ` (${counts})` : ""}` +
      (more > 0 ? `; the last ${data.shown} drawn` : "");
  }

  function draw() {
    const data = model.get("data") || {};
    drawHead(data);
    drawCounters(data);
    drawPlot(data);
    drawLegend(data);
    drawTable(data);
  }

  const names = ["data", "live", "error", "title"];
  for (const name of names) model.on(`change:${name}`, draw);
  let lastWidth = el.clientWidth;
  const observer = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(() => {
    if (el.clientWidth !== lastWidth) {
      lastWidth = el.clientWidth;
      drawPlot(model.get("data") || {});
    }
  });
  if (observer) observer.observe(el);
  draw();
  tell(model, true); // the kernel refreshes only while someone looks
  return () => {
    for (const name of names) model.off(`change:${name}`, draw);
    if (observer) observer.disconnect();
    tell(model, false);
  };
}

export default { render };
