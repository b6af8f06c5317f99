// Timeline front end: an SVG drawing of the lanes the kernel computes (widgets/timeline_model.py).
const SVG = "http://www.w3.org/2000/svg";
const LANE_H = 24;
const LABEL_W = 200;
const AXIS_H = 22;
const MIN_BAR = 4; // px: a millisecond activity is still a visible bar
const CHAR_W = 6.2; // px: about one character of an 11px summary
const MIN_NOTE = 48; // px: narrower than this, a summary is left to the tooltip

// A user's summary cut to `room` px (it is drawn as an SVG text node: never markup).
function fit(text, room) {
  const line = text.replace(/\s+/g, " ").trim();
  const n = Math.floor(room / CHAR_W);
  return line.length <= n ? line : `${line.slice(0, Math.max(1, n - 1))}…`;
}

// "name — summary" for tooltips.
function named(name, summary) {
  return summary ? `${name} — ${summary}` : name;
}

function s(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function label(sec) {
  if (sec < 1) return `${Math.round(sec * 1000)} ms`;
  if (sec < 120) return `${+sec.toFixed(2)} s`;
  if (sec < 7200) return `${+(sec / 60).toFixed(1)} min`;
  if (sec < 172800) return `${+(sec / 3600).toFixed(1)} h`;
  return `${+(sec / 86400).toFixed(1)} d`;
}

function render({ model, el }) {
  el.classList.add("dn-widget", "dn-timeline");
  const head = document.createElement("div");
  head.className = "dn-head";
  const title = document.createElement("span");
  title.className = "dn-title";
  const live = document.createElement("span");
  live.className = "dn-live";
  live.setAttribute("aria-live", "polite");
  head.append(title, live);
  // The run's static summary and details: the user's text, set as text only.
  const runSummary = document.createElement("div");
  runSummary.className = "dn-run-summary";
  const runDetails = document.createElement("details");
  runDetails.className = "dn-run-details";
  const runDetailsHead = document.createElement("summary");
  runDetailsHead.textContent = "details";
  const runDetailsText = document.createElement("div");
  runDetailsText.className = "dn-run-details-text";
  runDetails.append(runDetailsHead, runDetailsText);
  const holder = document.createElement("div");
  const note = document.createElement("div");
  note.className = "dn-note";
  const error = document.createElement("div");
  error.className = "dn-error";
  error.setAttribute("role", "alert");
  el.append(head, runSummary, runDetails, error, holder, note);

  function draw() {
    const data = { ...(model.get("data") || {}) };
    data.now = model.get("now");
    const lanes = data.lanes || [];
    title.textContent = model.get("title");
    runSummary.textContent = data.summary || "";
    runSummary.hidden = !data.summary;
    runDetailsText.textContent = data.details || "";
    runDetails.hidden = !data.details;
    live.textContent = model.get("live") ? "● live" : "";
    error.hidden = !model.get("error");
    error.textContent = model.get("error");
    const width = Math.max(480, el.clientWidth || 900);
    const plotW = width - LABEL_W - 16;
    const end = Math.max(data.end || 0, data.now || 0, 0.001);
    const x = (t) => LABEL_W + (Math.max(0, t) / end) * plotW;
    const height = AXIS_H + lanes.length * LANE_H + 4;
    const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": `Timeline of ${model.get("title")}: ${lanes.length} lanes over ${label(end)}` });
    svg.style.height = `${height}px`;
    const axis = s("g", { class: "dn-axis" });
    // The kernel picks the ticks (round values: 0, 1 s, 2 s, 5 s ... min, h; see
    // widgets/models.py axis_ticks), up to the end of the axis.
    const ticks = model.get("ticks") || [];
    for (const [t, text] of ticks.length ? ticks : [[0, "0"]]) {
      if (t > end + 1e-9) continue;
      axis.append(s("line", { x1: x(t), x2: x(t), y1: AXIS_H - 4, y2: height }));
      axis.append(s("text", { x: x(t) + 2, y: AXIS_H - 8 }, text));
    }
    svg.append(axis);
    lanes.forEach((lane, i) => {
      const y = AXIS_H + i * LANE_H;
      const g = s("g", { class: "dn-lane", "data-key": lane.key });
      g.append(s("rect", { x: 0, y: y + 5, width: 4, height: LANE_H - 10, fill: lane.colour }));
      const name = s("text", { x: 8, y: y + LANE_H / 2 + 4, class: "dn-lane-label" },
        lane.label.length > 28 ? `${lane.label.slice(0, 27)}…` : lane.label);
      name.append(s("title", {}, [lane.label, lane.summary, lane.details].filter(Boolean).join("\n")));
      g.append(name);
      let first = Infinity;
      let last = -Infinity;
      for (const bar of lane.bars) {
        const stop = bar.end === null ? (data.now ?? end) : bar.end;
        const x0 = x(bar.start);
        const w = Math.max(MIN_BAR, x(stop) - x0);
        first = Math.min(first, x0);
        last = Math.max(last, x0 + w);
        let shape;
        if (bar.kind === "backoff") {
          shape = s("line", { x1: x0, x2: x0 + w, y1: y + LANE_H / 2, y2: y + LANE_H / 2,
            stroke: bar.colour, "stroke-width": 2, "stroke-dasharray": "4 3", class: "dn-bar dn-backoff" });
        } else {
          shape = s("rect", { x: x0, y: y + 4, width: w, height: LANE_H - 8, rx: 3, fill: bar.colour,
            class: `dn-bar dn-${bar.kind} dn-status-${bar.status}`, "data-status": bar.status,
            stroke: bar.end === null ? "#1971c2" : "none", "stroke-dasharray": bar.end === null ? "3 2" : "" });
        }
        const dur = bar.end === null ? "still going" : label(bar.end - bar.start);
        shape.append(s("title", {}, `${named(lane.label, lane.summary)}: ${bar.label} (${bar.status.replaceAll("_", " ")}, ${dur})` +
          (bar.detail ? `\n${bar.detail}` : "")));
        g.append(shape);
      }
      for (const tick of lane.ticks) {
        const tx = x(tick.at);
        const mark = tick.kind === "due"
          ? s("line", { x1: tx, x2: tx, y1: y + 2, y2: y + LANE_H - 2, stroke: "#495057", "stroke-width": 2, class: "dn-tick dn-due" })
          : s("path", { d: `M${tx - 5},${y + 5} L${tx + 5},${y + 5} L${tx},${y + 14} Z`,
            fill: tick.kind === "update" ? "#0c8599" : tick.kind === "marker" ? "#495057" : "#9c36b5",
            class: `dn-tick dn-${tick.kind}` });
        mark.append(s("title", {}, `${tick.kind}: ${named(tick.label, tick.summary)} at ${label(tick.at)}`));
        g.append(mark);
      }
      if (lane.summary && lane.bars.length) {
        // Beside the bars: after them if there is room, else before them.
        const right = LABEL_W + plotW - last - 6;
        const left = first - LABEL_W - 6;
        const after = right >= MIN_NOTE || right >= left;
        const room = after ? right : left;
        if (room >= MIN_NOTE || lane.summary.length * CHAR_W <= room) {
          const note = s("g", { class: "dn-lane-note" });
          note.append(s("title", {}, named(lane.label, lane.summary)));
          note.append(s("text", { x: after ? last + 5 : first - 5, y: y + LANE_H / 2 + 4,
            "text-anchor": after ? "start" : "end", class: "dn-lane-summary" }, fit(lane.summary, room)));
          g.append(note);
        }
      }
      svg.append(g);
    });
    if (data.now !== null && data.now !== undefined) {
      const nx = x(data.now);
      const now = s("line", { x1: nx, x2: nx, y1: AXIS_H - 4, y2: height, class: "dn-now" });
      now.append(s("title", {}, `now: ${label(data.now)} after the start`));
      svg.append(now);
    }
    holder.replaceChildren(svg);
    note.textContent = data.hidden_lanes ? `${data.hidden_lanes} more lanes not drawn` : "";
  }

  const onChange = () => draw();
  model.on("change:data", onChange);
  model.on("change:live", onChange);
  model.on("change:now", onChange);
  model.on("change:ticks", onChange);
  model.on("change:error", onChange);
  let lastWidth = el.clientWidth;
  const observer = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(() => {
    if (el.clientWidth !== lastWidth) {
      lastWidth = el.clientWidth;
      draw();
    }
  });
  if (observer) observer.observe(el);
  draw();
  tell(model, true); // the kernel refreshes only while someone looks
  return () => {
    model.off("change:data", onChange);
    model.off("change:live", onChange);
    model.off("change:now", onChange);
    model.off("change:ticks", onChange);
    model.off("change:error", onChange);
    tell(model, false);
    if (observer) observer.disconnect();
  };
}

export default { render };
