// The web UI's schedules: the list (#/schedules) and a schedule's page (#/schedules/{id})
// over /durable/api/v1/schedules. Every action time the schedule came to is a row of its
// action log: skipped ones (a run it started was still open) and missed ones (the
// service came back after the catch-up window) are marked, with the reason the engine
// recorded, as the ScheduleView widget marks them. Everything is a text node, never
// markup; views are rebuilt only when their data changed (live refresh keeps focus).

let ctx = null;
const view = { listKey: "", pageKey: "", last: null };

/** app.js's helpers: {api, el, showError, fmtTime, detailHref, refresh, current}
 * (`current()`: the route shown now, to drop what arrives for a route left meanwhile). */
export function setup(helpers) {
  ctx = helpers;
}

const $ = (sel) => document.querySelector(sel);

// -- routes ------------------------------------------------------------------------------

/** The route of "#/schedules..." (path and query after "#"), else null. */
export function parseScheduleRoute(path, params) {
  if (path === "/schedules" || path === "/schedules/") {
    return { view: "schedules", query: params.get("query") || "" };
  }
  const m = path.match(/^\/schedules\/(.+)$/);
  if (m) return { view: "schedule", id: decodeURIComponent(m[1]) };
  return null;
}

export function schedulesHref(query = "") {
  return query ? `#/schedules?${new URLSearchParams({ query })}` : "#/schedules";
}

export function scheduleHref(id) {
  return `#/schedules/${encodeURIComponent(id)}`;
}

/** The API path of a schedule's endpoint; "." and ".." go in the query (schedule?...). */
export function schedulePath(id, sub = "") {
  const quoted = encodeURIComponent(id);
  if (quoted === "." || quoted === "..") {
    return { path: `schedule${sub}`, params: { schedule_id: id } };
  }
  return { path: `schedules/${quoted}${sub}`, params: {} };
}

/** Forget what the views show (a route change redraws them). */
export function resetSchedules() {
  view.listKey = "";
  view.pageKey = "";
}

// -- formatting ----------------------------------------------------------------------------

function time(iso) {
  // In UTC, said so: the CLI, the widget and the REST API show schedule times in UTC, and
  // a schedule's times are easiest to compare with its spec there.
  const { el } = ctx;
  return iso ? el("time", { datetime: iso, title: iso }, utc(iso)) : "—";
}

function utc(iso) {
  return iso ? `${iso.replace("T", " ").replace(/(\.\d+)?Z$/, "")} UTC` : "—";
}

function stateBadge(paused) {
  return ctx.el("span", { class: `sched-state ${paused ? "paused" : "active"}` },
    paused ? "paused" : "active");
}

function seconds(value) {
  if (value === null || value === undefined) return "—";
  for (const [unit, name] of [[86400, "d"], [3600, "h"], [60, "min"]]) {
    if (value >= unit && value % unit === 0) return `${value / unit} ${name}`;
  }
  return `${value} s`;
}

// -- the list --------------------------------------------------------------------------------

export async function refreshSchedules(route) {
  const { api, el } = ctx;
  const data = await api("schedules", { params: { query: route.query } });
  if (ctx.current() !== route) return;
  $("#schedule-query").removeAttribute("aria-invalid");
  const key = JSON.stringify([route.query, data]);
  if (key === view.listKey) return;
  view.listKey = key;
  const rows = data.schedules.map((s) => {
    const c = s.counts || {};
    const next = s.next_action_times[0];
    return el("tr", { "data-id": s.id, class: s.paused ? "paused" : null },
      el("td", {}, stateBadge(s.paused)),
      el("td", { class: "mono" }, el("a", { href: scheduleHref(s.id) }, s.id)),
      el("td", {}, s.workflow_type),
      el("td", {}, s.spec),
      el("td", {}, s.paused ? el("span", { class: "muted" }, "— (paused)") : time(next)),
      el("td", { class: "num", "data-count": "started" }, c.started ?? "—"),
      el("td", { class: `num${c.skipped_overlap ? " count-skipped" : ""}`, "data-count": "skipped" },
        c.skipped_overlap ?? "—"),
      el("td", { class: `num${c.missed_catchup_window ? " count-missed" : ""}`, "data-count": "missed" },
        c.missed_catchup_window ?? "—"),
      el("td", { class: "num" }, c.running ?? "—"),
      el("td", { class: "details" }, s.note || ""));
  });
  if (!rows.length) {
    rows.push(el("tr", { class: "empty" }, el("td", { colspan: 10 },
      route.query ? "No schedules match this filter." : "No schedules in this namespace yet.")));
  }
  $("#schedules tbody").replaceChildren(...rows);
  const n = data.schedules.length;
  $("#schedules-caption").textContent = `${n} schedule${n === 1 ? "" : "s"}` +
    `${route.query ? ` matching ${route.query}` : ""}, by id` +
    `${data.truncated ? ` (the first ${data.limit} only)` : ""}`;
}

/** The list could not be loaded: no stale rows under a filter the server refused. */
export function schedulesFailed(route, err) {
  const { el, showError } = ctx;
  const refused = err.status >= 400 && err.status < 500;
  if (refused && route.query) $("#schedule-query").setAttribute("aria-invalid", "true");
  showError(refused ? err.message : `Could not load: ${err.message}`);
  if (!refused && view.listKey) return; // a failed live refresh keeps its rows
  view.listKey = "";
  $("#schedules tbody").replaceChildren(el("tr", { class: "empty" },
    el("td", { colspan: 10 }, refused && route.query
      ? "No schedules: correct the filter above, or clear it." : "No schedules shown.")));
  $("#schedules-caption").textContent = "No schedules: the list could not be loaded";
}

// -- a schedule's page -------------------------------------------------------------------------

export function clearSchedule(route) {
  view.pageKey = "";
  view.last = null;
  $("#schedule-body").hidden = true;
  $("#schedule-title").textContent = `Schedule ${route.id}`;
  document.title = `${route.id} · Durable schedules`;
  for (const sel of ["#schedule-summary", "#schedule-counters", "#schedule-upcoming",
    "#schedule-running", "#schedule-log tbody", "#schedule-legend"]) {
    $(sel).replaceChildren();
  }
}

export async function refreshSchedule(route) {
  const { path, params } = schedulePath(route.id);
  const data = await ctx.api(path, { params: { ...params, log_limit: 200 } });
  if (ctx.current() !== route) return;
  const key = JSON.stringify(data.schedule) + JSON.stringify(data.actions) + data.logged;
  view.last = data;
  $("#schedule-body").hidden = false;
  if (key === view.pageKey) return;
  view.pageKey = key;
  renderScheduleSummary(data.schedule);
  renderCounters(data);
  renderUpcoming(data.schedule);
  renderLog(data);
  renderLegend(data.kinds);
}

function renderScheduleSummary(s) {
  const { el } = ctx;
  $("#schedule-title").textContent = `Schedule ${s.id}`;
  document.title = `${s.id} · Durable schedules`;
  const spec = s.spec;
  const items = [
    ["State", stateBadge(s.state.paused)],
    ["Note", s.state.note ? el("span", { class: "sched-note" }, s.state.note) : "—"],
    ["Workflow type", s.workflow_type],
    ["Workflow id", el("span", { class: "mono" }, `${s.action.workflow_id}-<action time>`)],
    ["Task queue", s.action.task_queue],
    ["Spec", spec.text],
  ];
  if (spec.calendars.length) items.push(["Calendars", JSON.stringify(spec.calendars)]);
  if (spec.skip.length) items.push(["Skip", JSON.stringify(spec.skip)]);
  if (spec.start_at || spec.end_at) {
    items.push(["Between", `${utc(spec.start_at)} and ${utc(spec.end_at)}`]);
  }
  if (spec.jitter_seconds) items.push(["Jitter", `up to ${seconds(spec.jitter_seconds)}`]);
  items.push(
    ["Overlap policy", s.policy.overlap],
    ["Catch-up window", s.policy.catchup_window_text],
    ["Pause on failure", s.policy.pause_on_failure ? "yes" : "no"],
  );
  if (s.state.limited_actions) items.push(["Remaining actions", String(s.state.remaining_actions)]);
  items.push(["Created", time(s.info.created_at)], ["Updated", time(s.info.last_updated_at)]);
  if (s.info.invalid_schedule_error) {
    items.push(["Cannot run", el("span", { class: "error-text" }, s.info.invalid_schedule_error)]);
  }
  $("#schedule-summary").replaceChildren(...items.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  $("#pause-schedule").disabled = s.state.paused;
  $("#unpause-schedule").disabled = !s.state.paused;
}

function renderCounters(data) {
  const { el } = ctx;
  const info = data.schedule.info;
  const counter = (cls, label, n, title) =>
    el("div", { class: `counter ${cls}${n ? " nonzero" : ""}`, title, "data-counter": cls },
      el("span", { class: "counter-n" }, String(n)), el("span", { class: "counter-label" }, label));
  $("#schedule-counters").replaceChildren(
    counter("started", "actions taken", info.num_actions, "num_actions"),
    counter("skipped", "skipped (overlap)", info.num_actions_skipped_overlap,
      "num_actions_skipped_overlap: not started, a run of this schedule was still open"),
    counter("missed", "missed (catch-up window)", info.num_actions_missed_catchup_window,
      "num_actions_missed_catchup_window: the service came back too late for them"),
    counter("running", "running", info.running_actions.length, "running_actions"),
    counter("waiting", "buffered", info.buffered_actions.length,
      "buffered_actions: starts waiting for the open run to close"),
  );
}

function renderUpcoming(s) {
  const { el, detailHref } = ctx;
  const times = s.info.next_action_times;
  const items = times.map((t) => el("li", {}, time(t)));
  $("#schedule-upcoming").replaceChildren(...(items.length ? items
    : [el("li", { class: "muted" }, "No upcoming action times.")]));
  $("#upcoming-paused").hidden = !s.state.paused;
  const running = s.info.running_actions.map((r) => el("li", {},
    el("a", { href: detailHref(r.workflow_id, r.run_id), class: "mono" }, r.workflow_id)));
  $("#schedule-running").replaceChildren(...(running.length ? running
    : [el("li", { class: "muted" }, "No run of this schedule is open.")]));
}

function outcomeChip(kind, label, colour) {
  return ctx.el("span", { class: `outcome-chip kind-${kind}`, style: `background:${colour}` }, label);
}

function renderLog(data) {
  const { el, detailHref } = ctx;
  const kinds = data.kinds || {};
  const colour = (kind) => kinds[kind]?.colour || "#868e96";
  const rows = [];
  // The buffered starts first (the newest rows are at the top): they have no log row yet.
  for (const t of [...data.schedule.info.buffered_actions].reverse()) {
    rows.push(el("tr", { "data-kind": "waiting", class: "kind-row-waiting" },
      el("td", {}, time(t)),
      el("td", {}, outcomeChip("waiting", kinds.waiting?.label || "buffered (waiting)", colour("waiting"))),
      el("td", { class: "details" }, "buffered: starts when the open run closes"),
      el("td", {}, ""), el("td", {}, data.schedule.policy.overlap), el("td", {}, "—"),
      el("td", {}, "—")));
  }
  for (const a of [...data.actions].reverse()) {
    const run = a.run_id
      ? [el("a", { href: detailHref(a.workflow_id, a.run_id), class: "mono", title: a.run_id },
        a.workflow_id), a.run_status ? " " : null, a.run_status
        ? el("span", { class: `status ${a.run_status}` }, a.run_status.replace("_", " ")) : null]
      : "—";
    const reason = a.detail || (a.kind === "started" ? "" : kinds[a.kind]?.help || "");
    rows.push(el("tr", { "data-kind": a.kind, "data-outcome": a.outcome, class: `kind-row-${a.kind}` },
      el("td", {}, time(a.nominal_time)),
      el("td", {}, outcomeChip(a.kind, a.label, colour(a.kind)),
        // Kinds that group several outcomes also say which one.
        ["not_taken", "ended_other"].includes(a.kind)
          ? el("span", { class: "muted" }, ` ${a.outcome.replaceAll("_", " ")}`) : null),
      el("td", { class: "details" }, reason),
      el("td", {}, a.source),
      el("td", {}, a.overlap),
      el("td", {}, time(a.decided_time)),
      el("td", {}, run)));
  }
  if (!rows.length) {
    rows.push(el("tr", { class: "empty" }, el("td", { colspan: 7 }, "No action time has come yet.")));
  }
  $("#schedule-log tbody").replaceChildren(...rows);
  const earlier = data.logged - data.shown;
  const skipped = data.by_outcome.skipped_overlap || 0;
  const missed = data.by_outcome.missed_catchup_window || 0;
  $("#schedule-log-caption").textContent = `${data.logged} action time${data.logged === 1 ? "" : "s"} ` +
    `logged (${skipped} skipped by overlap, ${missed} missed the catch-up window), newest first` +
    `${earlier > 0 ? `; the latest ${data.shown} shown` : ""}`;
}

function renderLegend(kinds) {
  const { el } = ctx;
  const items = Object.entries(kinds || {}).map(([kind, k]) => el("li", {},
    outcomeChip(kind, k.label, k.colour), " ", el("span", { class: "muted" }, k.help)));
  $("#schedule-legend").replaceChildren(...items);
}

// -- actions --------------------------------------------------------------------------------

async function scheduleAct(action) {
  const s = view.last?.schedule;
  if (!s) return;
  const body = {};
  if (action === "trigger") {
    const overlap = $("#trigger-overlap").value;
    if (overlap) body.overlap = overlap;
  } else {
    const note = $("#schedule-note").value.trim();
    if (note) body.note = note;
  }
  const verb = { trigger: "Trigger", pause: "Pause", unpause: "Unpause" }[action];
  try {
    const { path, params } = schedulePath(s.id, `/${action}`);
    const answer = await ctx.api(path, { method: "POST", body, params });
    if (action !== "trigger") $("#schedule-note").value = "";
    // A trigger says what became of it (skipped under SKIP while a run is open).
    const said = answer && answer.outcome
      ? `${answer.outcome.replace(/_/g, " ")}${answer.detail ? ` (${answer.detail})` : ""}`
      : "done";
    $("#schedule-done").textContent = `${verb}: ${said}, ${new Date().toLocaleTimeString()}`;
    ctx.showError("");
    await ctx.refresh();
  } catch (err) {
    ctx.showError(`${verb} failed: ${err.message}`);
  }
}

export function initSchedules() {
  $("#schedule-filter").addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = schedulesHref($("#schedule-query").value.trim());
  });
  $("#clear-schedule-filter").addEventListener("click", () => {
    $("#schedule-query").value = "";
    location.hash = schedulesHref("");
  });
  $("#trigger-schedule").addEventListener("click", () => scheduleAct("trigger"));
  $("#pause-schedule").addEventListener("click", () => scheduleAct("pause"));
  $("#unpause-schedule").addEventListener("click", () => scheduleAct("unpause"));
}
