// The durable-notebook web UI: execution list and execution page over /durable/api/v1/.
// No build step: a plain ES module. Views are rebuilt from data with DOM calls (never
// innerHTML: ids, payloads and failure messages are always text nodes), and only when
// the data changed, so live refresh keeps focus.

import {
  STATUSES, attributeChips, countStatuses, renderStatusChips, suggestionList, withStatus,
} from "./runs.js";
import {
  clearSchedule, initSchedules, parseScheduleRoute, refreshSchedule, refreshSchedules,
  resetSchedules, schedulesFailed, setup as setupSchedules,
} from "./schedules.js";

const BASE = document.body.dataset.base || "./";
const API = `${BASE}api/v1/`;
const TOKEN = new URLSearchParams(location.search).get("token");
const REFRESH_MS = 2000;
// Counting by status reads the whole filter: during live refresh, at most every 5 s (as
// the ExecutionList widget's COUNT_INTERVAL, widgets/execution_list.py); a new filter or
// status chip counts at once. The rows never wait for a count.
const COUNT_MS = 5000;
const PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 1000;

// -- talking to the server -------------------------------------------------------------

function xsrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
  return match ? decodeURIComponent(match[1]) : document.body.dataset.xsrf || "";
}

export async function api(path, { method = "GET", body, params } = {}) {
  const url = new URL(API + path, location.href);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  }
  const headers = { Accept: "application/json" };
  // With ?token= in the page URL, pass it on; otherwise the login cookie is enough for
  // GETs, and POSTs carry the XSRF token jupyter_server checks.
  if (TOKEN) headers.Authorization = `token ${TOKEN}`;
  if (method !== "GET") {
    headers["X-XSRFToken"] = xsrfToken();
    headers["Content-Type"] = "application/json";
  }
  const response = await fetch(url, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = data?.error?.message || `${response.status} ${response.statusText}`;
    const err = new Error(message);
    err.status = response.status;
    err.code = data?.error?.code || "";
    throw err;
  }
  return data;
}

// -- small DOM helpers -----------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (sel) => document.querySelector(sel);

function showError(message) {
  const box = $("#error");
  if (!message) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.textContent = message;
  box.hidden = false;
}

// -- which database ---------------------------------------------------------------------

const DB_SOURCES = {
  environment: "The server read this URL from DURABLE_DATABASE_URL when it started.",
  config: "The server's configuration sets this URL (c.DurableExtension.database_url).",
  default: "The default: .durable/durable.db under the server's root directory " +
    "(DURABLE_DATABASE_URL was not set when the server started).",
};

/** The header's database URL (password hidden by the server) and where it came from. */
async function loadInfo() {
  state.infoFailed = false;
  try {
    const { database } = await api("info");
    $("#db-url").textContent = database.url;
    $("#db-url").title = `${database.backend} database read by this server`;
    $("#db-source").textContent = `${DB_SOURCES[database.source] || ""} ` +
      `Kernels started by this server get ${database.env_var} set to it.`;
  } catch {
    state.infoFailed = true; // asked again at the next refresh
    $("#db-url").textContent = "(unknown: the server did not say)";
  }
}

// -- formatting ------------------------------------------------------------------------

function fmtTime(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(undefined, {
    year: "numeric", month: "short", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

function timeCell(iso, extra = {}) {
  return el("td", extra, iso ? el("time", { datetime: iso, title: iso }, fmtTime(iso)) : "—");
}

export function fmtDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "—";
  const neg = ms < 0;
  ms = Math.abs(ms);
  let out;
  if (ms < 1000) out = `${Math.round(ms)} ms`;
  else if (ms < 60_000) out = `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  else if (ms < 3_600_000) out = `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  else if (ms < 86_400_000) out = `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
  else out = `${Math.floor(ms / 86_400_000)} d ${Math.round((ms % 86_400_000) / 3_600_000)} h`;
  return neg ? `-${out}` : out;
}

function statusBadge(status) {
  return el("span", { class: `status ${status}` }, (status || "").replace("_", " "));
}

function shortType(eventType) {
  return (eventType || "").replace(/^EVENT_TYPE_/, "");
}

function b64decode(text) {
  const bytes = Uint8Array.from(atob(text || ""), (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

/** Decode a Temporal payload (json/plain) into a value; other encodings are described. */
export function decodePayload(payload) {
  try {
    const encoding = b64decode(payload?.metadata?.encoding || "");
    if (encoding === "json/plain") return JSON.parse(b64decode(payload.data));
    if (encoding === "binary/null") return null;
    return `<${encoding || "unknown"} payload>`;
  } catch {
    return "<undecodable payload>";
  }
}

function payloadsText(p) {
  const list = p?.payloads;
  if (!list || !list.length) return "";
  return truncate(list.map((x) => JSON.stringify(decodePayload(x))).join(", "), 200);
}

/** The user's summary (plain text: a text node, never markup) and the kernel's line. */
function withUserSummary(user, text) {
  if (!user) return [text];
  return [el("span", { class: "user-summary" }, user), text ? ` · ${text}` : ""];
}

function truncate(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

/** One line describing an event's attributes: payloads decoded, ids and names kept. */
export function describeAttributes(attrs) {
  if (!attrs) return "";
  const parts = [];
  for (const [key, value] of Object.entries(attrs)) {
    if (["identity", "requestId", "header", "sdkMetadata", "meteringMetadata"].includes(key)) continue;
    if (value === null || value === undefined || value === "") continue;
    if (value && typeof value === "object" && Array.isArray(value.payloads)) {
      parts.push(`${key}: ${payloadsText(value)}`);
    } else if (key === "failure" || key === "lastFailure") {
      parts.push(`${key}: ${value.message || JSON.stringify(value)}`);
    } else if (value && typeof value === "object" && "name" in value && Object.keys(value).length <= 2) {
      parts.push(`${key}: ${value.name}`);
    } else if (typeof value === "object") {
      const text = JSON.stringify(value);
      if (text !== "{}" && text !== "[]") parts.push(`${key}: ${truncate(text, 120)}`);
    } else {
      parts.push(`${key}: ${value}`);
    }
  }
  return parts.join(" · ");
}

function attrsOf(event) {
  const key = Object.keys(event).find((k) => k.endsWith("EventAttributes"));
  return key ? event[key] : {};
}

// -- list view -------------------------------------------------------------------------

const state = {
  route: null,
  listKey: "",
  // Keyset paging: the server hands out an opaque token for the page after the one shown.
  // The current page's token is in the URL (#/?after=), so links stay shareable; the
  // tokens of the pages before it are only known in memory, as a stack ("" is the first
  // page), for the filter and page size in pagerKey.
  pageStack: [],
  pagerKey: "",
  listAfter: "",
  nextToken: null,
  pendingNext: null,
  detailKey: "",
  historyKey: "",
  historyView: "compact",
  refreshing: false,
  refreshAgain: false,
  lastDetail: null,
  // The route whose rows the list shows (they stay while the next page loads).
  listShown: null,
  infoFailed: false,
  // The search attributes the filter box suggests ({name, type, custom}).
  attributes: [],
  // The last count by status: {query, status, at (ms), pending, result ({counts, error},
  // null until the first count of this query is in)}; chipsKey: what the chips show.
  counting: null,
  chipsKey: "",
};

function parseRoute() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, qs] = hash.split("?");
  const params = new URLSearchParams(qs || "");
  const scheduled = parseScheduleRoute(path, params);
  if (scheduled) return scheduled;
  const m = path.match(/^\/workflows\/(.+)$/);
  if (m) {
    return { view: "detail", id: decodeURIComponent(m[1]), runId: params.get("run_id") || "" };
  }
  const limit = Number.parseInt(params.get("limit") || "", 10);
  const status = params.get("status") || "";
  return {
    view: "list",
    query: params.get("query") || "",
    status: STATUSES.includes(status) ? status : "",
    limit: limit >= 1 && limit <= MAX_PAGE_SIZE ? limit : PAGE_SIZE,
    after: params.get("after") || "",
  };
}

// The API path of a run's endpoint ("" for the run itself, "/history", "/cancel", ...) and
// its query. The id is one path segment, escaped; an id "." or ".." cannot be one (the
// browser resolves dot segments, escaped or not, before sending), so those go in the
// query of the workflow/... form of the same endpoint.
export function runPath(id, sub = "") {
  const quoted = encodeURIComponent(id);
  if (quoted === "." || quoted === "..") {
    return { path: `workflow${sub}`, params: { workflow_id: id } };
  }
  return { path: `workflows/${quoted}${sub}`, params: {} };
}

// The page's own route (after "#"): not resolved by the browser, so any id goes as is.
export function detailHref(id, runId) {
  const qs = runId ? `?run_id=${encodeURIComponent(runId)}` : "";
  return `#/workflows/${encodeURIComponent(id)}${qs}`;
}

export function listHref(query, after = "", limit = PAGE_SIZE, status = "") {
  const params = new URLSearchParams();
  if (query) params.set("query", query);
  if (status) params.set("status", status);
  if (limit !== PAGE_SIZE) params.set("limit", String(limit));
  if (after) params.set("after", after);
  const qs = params.toString();
  return `#/${qs ? `?${qs}` : ""}`;
}

/** The stack of earlier pages after moving from page `from` to page `to` (tokens, ""
 * for the first page) of the same list or of another one; `forward`: by "Next page". */
export function nextPageStack(stack, { sameList, from, to, forward }) {
  if (!sameList || !to) return [];
  if (to === from) return stack; // back from a run's page, say
  if (forward) return [...stack, from];
  if (stack.length && stack[stack.length - 1] === to) return stack.slice(0, -1);
  // Opened from a link (or an edited URL): the pages before it are not known.
  return [];
}

/** 1 for the first page, n when we walked there from the first page, else null. */
export function pageNumber(stack, after) {
  if (!after) return 1;
  return stack.length && stack[0] === "" ? stack.length + 1 : null;
}

function updatePagerStack(next) {
  const key = `${next.limit}\n${next.status}\n${next.query}`;
  const forward = Boolean(next.after) &&
    (next.after === state.pendingNext || next.after === state.nextToken);
  state.pageStack = nextPageStack(state.pageStack, {
    sameList: state.pagerKey === key, from: state.listAfter, to: next.after, forward,
  });
  state.pagerKey = key;
  state.listAfter = next.after;
  state.pendingNext = null;
  state.nextToken = null;
}

/** The pager's buttons and label; `loading`: the page is on its way, so whether there
 * is a next page is not known yet (the button keeps its state, and focus, meanwhile);
 * `failed`: no page could be shown, so there is no page number either. */
function renderPager({ loading = false, failed = false } = {}) {
  const { after } = state.route;
  const number = pageNumber(state.pageStack, after);
  const focused = document.activeElement;
  $("#first-page").disabled = !after;
  $("#prev-page").disabled = !state.pageStack.length;
  if (!loading) $("#next-page").disabled = !state.nextToken;
  $("#page-label").textContent = failed ? ""
    : number ? `Page ${number}`
      : "A later page (opened from a link: use First page to start over)";
  // Reaching the first or last page disables the button just used: keep the keyboard
  // focus in the pager rather than dropping it to the document.
  if (focused?.disabled && focused.closest(".pager")) {
    const other = ["#prev-page", "#next-page", "#first-page"].map($).find((b) => !b.disabled);
    if (other) other.focus();
  }
}

function listRouteKey(route) {
  return JSON.stringify([route.query, route.status, route.limit, route.after]);
}

/** The names the filter box suggests: the system attributes and the custom ones. */
async function loadAttributes() {
  try {
    state.attributes = suggestionList(await api("search-attributes"));
  } catch {
    // suggestions are a help: the list reports a server that does not answer
  }
}


/** Counts the route's filter by status unless a count of it (and of its status chip) is
 * on its way or less than COUNT_MS old; the chips are drawn when it is in. */
function countIfDue(route) {
  const { query, status } = route;
  const last = state.counting;
  const same = last && last.query === query && last.status === status;
  if (same && (last.pending || Date.now() - last.at < COUNT_MS)) return;
  // The counts of the same filter stay up (the chip pressed changes at once) until the
  // new ones are in; those of another filter do not.
  const counting = {
    query, status, at: Date.now(), pending: true,
    result: last && last.query === query ? last.result : null,
  };
  state.counting = counting;
  countStatuses(api, query).then((result) => {
    counting.pending = false;
    counting.at = Date.now();
    if (state.counting !== counting) return; // another filter or chip took over
    counting.result = result;
    drawChips();
  });
}

/** The status chips of the list shown (a list that failed shows none), redrawn only when
 * what they show changed (so a live refresh keeps the focus on a chip). */
function drawChips() {
  const route = state.route;
  const counting = state.counting;
  if (route.view !== "list" || state.listShown !== listRouteKey(route)) return;
  if (!counting || counting.query !== route.query) return;
  const { counts, error } = counting.result || { counts: null, error: "" };
  const { query, status, limit } = route;
  const key = JSON.stringify([query, status, limit, counts, error]);
  if (key === state.chipsKey) return;
  state.chipsKey = key;
  renderStatusChips($("#status-chips"), {
    counts, error, current: status, href: (s) => listHref(query, "", limit, s || ""),
  });
}

async function refreshList() {
  const route = state.route;
  const { query, status, limit, after } = route;
  const listed = withStatus(query, status);
  countIfDue(route); // not awaited: the rows are drawn as soon as they are in
  const data = await api("workflows", { params: { query: listed, limit, page_token: after } });
  if (state.route !== route) return; // the user moved on while this page loaded
  $("#query").removeAttribute("aria-invalid");
  const key = JSON.stringify(data);
  if (key === state.listKey) {
    drawChips();
    return;
  }
  state.listKey = key;
  state.listShown = listRouteKey(route);
  drawChips();
  state.nextToken = data.next_page_token;
  const tbody = $("#executions tbody");
  const rows = data.executions.map((e) =>
    el("tr", {},
      el("td", {}, statusBadge(e.status)),
      el("td", { class: "mono" }, el("a", { href: detailHref(e.id, e.run_id) }, e.id)),
      el("td", {}, e.workflow_type),
      el("td", {}, e.task_queue),
      timeCell(e.start_time),
      timeCell(e.close_time),
      el("td", { class: "num" }, e.history_length),
      el("td", { class: "attrs" }, attributeChips(e.search_attributes))));
  if (!rows.length) {
    rows.push(el("tr", { class: "empty" },
      el("td", { colspan: 8 }, listed ? "No executions match this filter."
        : "No executions in this database yet. Runs a notebook started are missing? " +
          "See “Not seeing your runs?” at the top.")));
  }
  tbody.replaceChildren(...rows);
  const number = pageNumber(state.pageStack, after);
  const where = number ? `page ${number}` : "a later page";
  $("#list-caption").textContent =
    `${data.executions.length} execution${data.executions.length === 1 ? "" : "s"}` +
    `${listed ? ` matching ${listed}` : ""}, newest first (${where}` +
    `${data.next_page_token ? ", more on the next page" : ", the last page"})`;
  renderPager();
}

/** The list could not be loaded. Rows of another filter or page (or of a filter the
 * server refused) must not stay under this one: they are cleared, with the count and
 * the pager; a failed live refresh of the same page keeps its rows. */
function listFailed(route, err) {
  const refused = err.status >= 400 && err.status < 500;
  const badFilter = refused && Boolean(route.query || route.status);
  if (badFilter) $("#query").setAttribute("aria-invalid", "true");
  else $("#query").removeAttribute("aria-invalid");
  showError(refused ? err.message : `Could not load: ${err.message}`);
  state.nextToken = null;
  if (!refused && state.listShown === listRouteKey(route)) {
    renderPager();
    return;
  }
  state.listKey = "";
  state.listShown = null;
  $("#status-chips").replaceChildren();
  state.chipsKey = "";
  const why = badFilter ? "the filter could not be read" : "the list could not be loaded";
  $("#executions tbody").replaceChildren(el("tr", { class: "empty" },
    el("td", { colspan: 8 }, badFilter
      ? "No executions: correct the filter above, or clear it."
      : "No executions shown.")));
  $("#list-caption").textContent = `No executions: ${why}`;
  renderPager({ failed: true });
}

// -- detail view -----------------------------------------------------------------------

async function refreshDetail() {
  const route = state.route;
  const { id, runId } = route;
  const run = runId ? { run_id: runId } : {};
  const get = (sub) => {
    const { path, params } = runPath(id, sub);
    return api(path, { params: { ...params, ...run } });
  };
  // The compact rows and the timeline's lanes come from the server's view model
  // (widgets/models.py, the one the notebook widgets draw): the page only draws them.
  const [desc, history, compact, lanes] = await Promise.all([
    get(""), get("/history"), get("/compact"), get("/timeline"),
  ]);
  if (state.route !== route) return; // the user moved on while this run loaded
  const key = JSON.stringify([desc, history.events.length, lanes]);
  state.lastDetail = { desc, history, compact };
  $("#detail-body").hidden = false;
  if (key !== state.detailKey) {
    state.detailKey = key;
    renderSummary(desc);
    renderPending(desc);
    renderTimeline(lanes);
  }
  renderHistory();
}

/** Nothing of another run (or of a run that is gone) stays on the page: the summary,
 * pending work, timeline and history are emptied and hidden until this run loads. */
function clearDetail(route) {
  state.lastDetail = null;
  state.detailKey = "";
  state.historyKey = "";
  $("#detail-body").hidden = true;
  $("#detail-title").textContent = `Workflow ${route.id}`;
  document.title = `${route.id} · Durable executions`;
  for (const sel of ["#summary", "#pending tbody", "#timers tbody", "#timeline", "#history"]) {
    $(sel).replaceChildren();
  }
}

function renderSummary(d) {
  $("#detail-title").textContent = `Workflow ${d.id}`;
  document.title = `${d.id} · Durable executions`;
  const items = [
    ["Status", statusBadge(d.status)],
    ["Type", d.workflow_type],
    ...(d.static_summary ? [["Summary", el("span", { class: "static-summary" }, d.static_summary)]] : []),
    ...(d.static_details ? [["Details", el("div", { class: "static-details" }, d.static_details)]] : []),
    ["Run id", el("span", { class: "mono" }, d.run_id)],
    ["Task queue", d.task_queue],
    ["Started", el("time", { datetime: d.start_time, title: d.start_time }, fmtTime(d.start_time))],
    ["Closed", d.close_time ? el("time", { datetime: d.close_time, title: d.close_time }, fmtTime(d.close_time)) : "—"],
    ["Duration", fmtDuration((d.close_time ? new Date(d.close_time) : new Date()) - new Date(d.start_time))],
    ["History", `${d.history_length} events, ${d.history_size_bytes} bytes`],
    ["Share", el("a", { href: detailHref(d.id, d.run_id) }, "Link to this run")],
  ];
  if (d.pending_workflow_task && d.pending_workflow_task.attempt > 1) {
    items.splice(2, 0, ["Workflow task", `${d.pending_workflow_task.state}, attempt ${d.pending_workflow_task.attempt} (failing)`]);
  }
  if (d.continued_as_new_run_id) {
    items.push(["Continued as", el("a", { href: detailHref(d.id, d.continued_as_new_run_id) }, d.continued_as_new_run_id)]);
  }
  $("#summary").replaceChildren(...items.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  const open = d.status === "RUNNING";
  $("#cancel-run").disabled = !open;
  $("#terminate-run").disabled = !open;
}

function renderPending(d) {
  const acts = d.pending_activities || [];
  const rows = acts.map((a) =>
    el("tr", {},
      el("td", { class: "mono" }, a.activity_id),
      el("td", {}, a.activity_type),
      el("td", {}, a.state + (a.cancel_requested ? " (cancel requested)" : "")),
      el("td", { class: "num" }, a.attempt),
      el("td", { class: "details" }, a.last_failure ? a.last_failure.message || JSON.stringify(a.last_failure) : "—"),
      timeCell(a.next_attempt_at),
      timeCell(a.last_heartbeat_time)));
  if (!rows.length) rows.push(el("tr", { class: "empty" }, el("td", { colspan: 7 }, "No pending activities.")));
  $("#pending tbody").replaceChildren(...rows);

  const timers = d.pending_timers || [];
  const trows = timers.map((t) =>
    el("tr", {},
      el("td", { class: "mono" }, t.timer_id),
      timeCell(t.fire_at),
      el("td", {}, fmtDuration(new Date(t.fire_at) - new Date()))));
  if (!trows.length) trows.push(el("tr", { class: "empty" }, el("td", { colspan: 3 }, "No pending timers.")));
  $("#timers tbody").replaceChildren(...trows);
}

/** Seconds since the run's start as the widgets write them (`+0.25 s`, `+12 ms`). */
function offset(sec) {
  return sec === null || sec === undefined ? "" : `+${fmtDuration(sec * 1000)}`;
}

const TICK_FILL = { signal: "#9c36b5", update: "#0c8599", marker: "#495057" };

/** The timeline the server computed (lanes of bars and ticks, axis ticks, "now"). */
function renderTimeline(data) {
  const lanes = data.lanes || [];
  const box = $("#timeline");
  if (!lanes.length) {
    box.replaceChildren(el("p", { class: "muted" }, "Nothing to draw yet."));
    return;
  }
  const W = 1000, LABEL = 200, LANE = 24, TOP = 22, MIN_BAR = 3;
  const H = TOP + lanes.length * LANE + 6;
  const end = Math.max(data.end || 0, data.now || 0, 0.001);
  const x = (t) => LABEL + (Math.max(0, t) / end) * (W - LABEL - 10);
  const children = [];
  for (const [at, text] of data.ticks || []) {
    if (at > end + 1e-9) continue;
    children.push(svg("line", { class: "axis", x1: x(at), x2: x(at), y1: TOP - 4, y2: H }));
    children.push(svg("text", { class: "tick", x: x(at) + 2, y: 14 }, text));
  }
  lanes.forEach((lane, i) => {
    const y = TOP + i * LANE;
    const g = svg("g", { class: "lane", "data-key": lane.key });
    g.append(svg("rect", { x: 0, y: y + 5, width: 4, height: LANE - 10, fill: lane.colour }));
    const named = lane.summary ? `${lane.label} — ${lane.summary}` : lane.label;
    g.append(svg("g", {}, svg("title", {}, [lane.label, lane.summary, lane.details].filter(Boolean).join("\n")),
      svg("text", { class: "lane-label", x: 8, y: y + 15 }, truncate(lane.label || "", 28))));
    let first = Infinity;
    let last = -Infinity;
    for (const bar of lane.bars) {
      const stop = bar.end === null ? (data.now ?? end) : bar.end;
      const x0 = x(bar.start);
      const w = Math.max(MIN_BAR, x(stop) - x0);
      first = Math.min(first, x0);
      last = Math.max(last, x0 + w);
      const took = bar.end === null ? "still going" : fmtDuration((bar.end - bar.start) * 1000);
      const title = svg("title", {}, `${named}: ${bar.label} (${bar.status.replaceAll("_", " ")}, ` +
        `${took})${bar.detail ? `\n${bar.detail}` : ""}`);
      g.append(bar.kind === "backoff"
        ? svg("line", { class: "backoff", x1: x0, x2: x0 + w, y1: y + 11, y2: y + 11, stroke: bar.colour,
          "stroke-width": 2, "stroke-dasharray": "4 3" }, title)
        : svg("rect", { class: `bar ${bar.kind}`, "data-status": bar.status, x: x0, y: y + 4, width: w,
          height: 14, rx: 2, fill: bar.colour }, title));
    }
    for (const tick of lane.ticks) {
      const tx = x(tick.at);
      const what = tick.summary ? `${tick.label} — ${tick.summary}` : tick.label;
      const title = svg("title", {}, `${tick.kind}: ${what} at ${offset(tick.at)}`);
      g.append(tick.kind === "due"
        ? svg("line", { class: "due", x1: tx, x2: tx, y1: y + 2, y2: y + LANE - 2, stroke: "#495057",
          "stroke-width": 2 }, title)
        : svg("path", { class: `mark ${tick.kind}`, d: `M${tx - 5},${y + 5} L${tx + 5},${y + 5} L${tx},${y + 14} Z`,
          fill: TICK_FILL[tick.kind] || "#495057" }, title));
    }
    if (lane.summary && lane.bars.length) {
      // The user's summary beside the bars (after them if there is room, else before).
      const right = W - 10 - last - 6;
      const left = first - LABEL - 6;
      const after = right >= 48 || right >= left;
      const room = after ? right : left;
      if (room >= 48) {
        const line = lane.summary.replace(/\s+/g, " ").trim();
        g.append(svg("g", {}, svg("title", {}, named),
          svg("text", { class: "lane-summary", x: after ? last + 5 : first - 5, y: y + 15,
            "text-anchor": after ? "start" : "end" }, truncate(line, Math.max(2, Math.floor(room / 6.5))))));
      }
    }
    children.push(g);
  });
  if (data.now !== null && data.now !== undefined) {
    children.push(svg("line", { class: "now", x1: x(data.now), x2: x(data.now), y1: TOP - 4, y2: H },
      svg("title", {}, `now: ${offset(data.now)} after the start`)));
  }
  const summary = `Timeline of ${lanes.length} lanes over ${fmtDuration(end * 1000)}`;
  const nodes = [svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": summary }, children)];
  if (data.hidden_lanes) nodes.push(el("p", { class: "muted" }, `${data.hidden_lanes} more lanes not drawn`));
  box.replaceChildren(...nodes);
}

function renderHistory() {
  const detail = state.lastDetail;
  if (!detail) return;
  const key = `${state.historyView}:${detail.history.events.length}:${detail.desc.status}`;
  if (key === state.historyKey) return;
  state.historyKey = key;
  for (const b of document.querySelectorAll(".tabs button")) {
    b.setAttribute("aria-pressed", String(b.dataset.view === state.historyView));
  }
  const events = detail.history.events;
  const box = $("#history");
  if (state.historyView === "json") {
    box.replaceChildren(el("pre", { class: "json", tabindex: 0, "aria-label": "History as JSON" },
      JSON.stringify(detail.history, null, 2)));
    return;
  }
  if (state.historyView === "full") {
    const rows = events.map((e) =>
      el("tr", {},
        el("td", { class: "num" }, e.eventId),
        timeCell(e.eventTime),
        el("td", { class: "mono" }, shortType(e.eventType)),
        el("td", { class: "details" }, withUserSummary(detail.compact.event_summaries?.[e.eventId],
          describeAttributes(attrsOf(e))))));
    box.replaceChildren(el("table", { class: "grid" },
      el("caption", {}, `All ${events.length} events`),
      el("thead", {}, el("tr", {},
        el("th", { scope: "col", class: "num" }, "Id"), el("th", { scope: "col" }, "Time"),
        el("th", { scope: "col" }, "Event"), el("th", { scope: "col" }, "Details"))),
      el("tbody", {}, rows)));
    return;
  }
  const steps = detail.compact.rows;
  const rows = steps.map((r) =>
    el("tr", { class: r.failed ? "failed" : null },
      el("td", {}, el("span", { class: "swatch", style: `background:${r.colour}`, "aria-hidden": "true" }),
        r.kind.replaceAll("_", " ")),
      el("td", { class: "mono" }, r.label),
      el("td", {}, el("span", { class: "chip", style: `background:${r.status_colour}` },
        r.status.replaceAll("_", " "))),
      el("td", { class: "num" }, r.attempts ? `×${r.attempts}` : ""),
      el("td", { class: "num" }, offset(r.start)),
      el("td", { class: "num" }, r.end === null ? "…" : r.end > r.start ? fmtDuration((r.end - r.start) * 1000) : ""),
      el("td", { class: "details", title: r.user_details || null }, withUserSummary(r.user_summary, r.summary)),
      el("td", { class: "mono" }, r.event_ids.join(", "))));
  box.replaceChildren(el("table", { class: "grid" },
    el("caption", {}, `${steps.length} steps (from ${detail.compact.event_count} events)`),
    el("thead", {}, el("tr", {},
      ["Step", "Name", "Status", "Attempts", "At", "Took", "Summary", "Events"].map((h) =>
        el("th", { scope: "col", class: ["At", "Took", "Attempts"].includes(h) ? "num" : null }, h)))),
    el("tbody", {}, rows)));
}

async function act(action) {
  const d = state.lastDetail?.desc;
  if (!d) return;
  const verb = action === "cancel" ? "Request cancellation of" : "Terminate";
  if (!window.confirm(`${verb} workflow ${d.id} (run ${d.run_id})?`)) return;
  try {
    const { path, params } = runPath(d.id, `/${action}`);
    await api(path, {
      method: "POST", body: { reason: "from the web UI" }, params: { ...params, run_id: d.run_id },
    });
    showError("");
    await refresh();
  } catch (err) {
    showError(`${verb} failed: ${err.message}`);
  }
}

// -- routing and refresh ---------------------------------------------------------------

async function refresh(routeChanged = false) {
  if (state.refreshing) {
    // A new route must not wait for the next tick (or forever, without live refresh).
    if (routeChanged) state.refreshAgain = true;
    return;
  }
  state.refreshing = true;
  state.refreshAgain = false;
  const route = state.route;
  try {
    if (state.infoFailed) loadInfo();
    if (route.view === "list") await refreshList();
    else if (route.view === "schedules") await refreshSchedules(route);
    else if (route.view === "schedule") await refreshSchedule(route);
    else await refreshDetail();
    if (state.route === route) {
      showError("");
      $("#updated").textContent = `Updated ${new Date().toLocaleTimeString()}`;
    }
  } catch (err) {
    if (state.route !== route) {
      // The user moved on while this loaded: the new route's own refresh reports.
    } else if (route.view === "list") {
      listFailed(route, err);
    } else if (route.view === "schedules") {
      schedulesFailed(route, err);
    } else if (route.view === "schedule" && err.status === 404) {
      clearSchedule(route); // only the error: no schedule of this id
      showError(err.message);
    } else if (err.status === 404) {
      clearDetail(route); // only the error: no run of this id (or run id) exists
      showError(err.message);
    } else {
      showError(`Could not load: ${err.message}`);
    }
  } finally {
    state.refreshing = false;
    if (state.refreshAgain) refresh();
  }
}

function route() {
  const previous = state.route;
  state.route = parseRoute();
  const list = state.route.view === "list";
  const { view } = state.route;
  $("#list-view").hidden = !list;
  $("#detail-view").hidden = view !== "detail";
  $("#schedules-view").hidden = view !== "schedules";
  $("#schedule-view").hidden = view !== "schedule";
  for (const a of document.querySelectorAll(".top nav a")) {
    const here = a.dataset.nav === (view.startsWith("schedule") ? "schedules" : "executions");
    if (here) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  state.listKey = "";
  state.detailKey = "";
  state.historyKey = "";
  resetSchedules();
  if (view === "schedules") {
    $("#schedule-query").value = state.route.query;
    document.title = "Durable schedules";
  } else if (view === "schedule") {
    if (!previous || previous.view !== "schedule" || previous.id !== state.route.id) {
      clearSchedule(state.route);
    }
  } else if (list) {
    updatePagerStack(state.route);
    renderPager({ loading: true });
    $("#query").value = state.route.query;
    document.title = "Durable executions";
  } else if (!previous || previous.view !== "detail" || previous.id !== state.route.id ||
             previous.runId !== state.route.runId) {
    clearDetail(state.route);
  }
  if (previous && previous.view !== state.route.view) $("#main").focus();
  refresh(true);
}

function init() {
  // Before the form's submit: Enter on a suggestion highlighted with the arrow keys takes
  // it; with none highlighted, Enter submits (suggest.js, a global).
  attachSuggestions($("#query"), $("#query-combo"), () => state.attributes, { cls: "suggest" });
  $("#filter").addEventListener("submit", (ev) => {
    ev.preventDefault();
    loadAttributes(); // one registered meanwhile is suggested from now on
    location.hash = listHref($("#query").value.trim(), "", state.route.limit ?? PAGE_SIZE,
      state.route.status || "");
  });
  $("#clear-filter").addEventListener("click", () => {
    $("#query").value = "";
    location.hash = listHref("", "", state.route.limit ?? PAGE_SIZE);
  });
  const here = (after) => listHref(state.route.query, after, state.route.limit, state.route.status);
  $("#first-page").addEventListener("click", () => {
    location.hash = here("");
  });
  $("#prev-page").addEventListener("click", () => {
    const stack = state.pageStack;
    if (!stack.length) return;
    location.hash = here(stack[stack.length - 1]);
  });
  $("#next-page").addEventListener("click", () => {
    if (!state.nextToken) return;
    state.pendingNext = state.nextToken;
    location.hash = here(state.nextToken);
  });
  for (const b of document.querySelectorAll(".tabs button")) {
    b.addEventListener("click", () => {
      state.historyView = b.dataset.view;
      renderHistory();
    });
  }
  $("#db-help").addEventListener("keydown", (ev) => {
    if (ev.key !== "Escape" || !$("#db-help").open) return;
    $("#db-help").open = false;
    $("#db-help summary").focus();
  });
  $("#cancel-run").addEventListener("click", () => act("cancel"));
  $("#terminate-run").addEventListener("click", () => act("terminate"));
  setupSchedules({ api, el, showError, fmtTime, detailHref, refresh: () => refresh(),
    current: () => state.route });
  initSchedules();
  window.addEventListener("hashchange", route);
  loadInfo();
  loadAttributes();
  setInterval(() => {
    if ($("#live").checked && document.visibilityState === "visible") refresh();
  }, REFRESH_MS);
  route();
}

init();
