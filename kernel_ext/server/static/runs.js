// The run list's filtering: status chips with exact counts (workflows/count with GROUP BY
// ExecutionStatus), the run's search attributes as chips, and the suggestions' names.
// Every value is a text node, never markup.

/** ExecutionStatus names as a list filter spells them (and a count's groups name them). */
export const STATUSES = ["Running", "Completed", "Failed", "Canceled", "Terminated", "ContinuedAsNew", "TimedOut"];

// The badge classes of app.js (the REST API's status names).
const BADGE = {
  Running: "RUNNING", Completed: "COMPLETED", Failed: "FAILED", Canceled: "CANCELED",
  Terminated: "TERMINATED", ContinuedAsNew: "CONTINUED_AS_NEW", TimedOut: "TIMED_OUT",
};

/** The filter narrowed to one status, kept whole in parentheses (never split). */
export function withStatus(query, status) {
  const q = (query || "").trim();
  if (!status) return q;
  const term = `ExecutionStatus = '${status}'`;
  return q ? `(${q}) AND ${term}` : term;
}

/** The count by status of the filter's matches. */
export function countQuery(query) {
  return `${(query || "").trim()} GROUP BY ExecutionStatus`.trim();
}

function node(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

/** `{count, groups}` of workflows/count as {total, byStatus} in the chips' order. */
export function countsOf(data) {
  const byStatus = {};
  for (const g of data.groups || []) byStatus[g.group_values[0]] = g.count;
  return { total: data.count, byStatus };
}

function label(status) {
  return status.replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase();
}

/** The chips: "All n" and one per status the filter's runs have (and the one pressed);
 * `counts` null when they could not be counted (`error` says why). */
export function renderStatusChips(box, { counts, error, current, href }) {
  const chips = [];
  const chip = (status, text) => {
    const a = node("a", `status-chip${status ? ` status-${BADGE[status] || ""}` : ""}`);
    a.href = href(status);
    a.setAttribute("aria-current", String((status || null) === (current || null)));
    a.dataset.status = status || "all";
    if (status) a.append(node("span", `swatch status-swatch ${BADGE[status] || ""}`));
    a.append(text);
    chips.push(a);
  };
  chip(null, counts ? `All ${counts.total}` : "All");
  for (const status of STATUSES) {
    const n = counts ? counts.byStatus[status] : undefined;
    if (n !== undefined) chip(status, `${label(status)} ${n}`);
    else if (status === current) chip(status, counts ? `${label(status)} 0` : label(status));
  }
  if (error) chips.push(node("span", "count-error", error));
  box.replaceChildren(...chips);
}

/** Counts the filter's runs by status (workflows/count, exact, of the whole filter
 * whichever chip is pressed): {counts, error} for renderStatusChips (`counts` null and
 * `error` saying why when they could not be counted). Never throws. */
export async function countStatuses(api, query) {
  const counting = countQuery(query);
  try {
    return { counts: countsOf(await api("workflows/count", { params: { query: counting } })), error: "" };
  } catch (err) {
    return { counts: null, error: `No counts: ${err.message} (counting: ${counting})` };
  }
}

function valueText(value) {
  if (Array.isArray(value)) return value.map(valueText).join(", ");
  if (value === null || value === undefined) return "";
  return String(value);
}

/** A run's search attributes as chips "CustomerId=abc" (text, never markup). */
export function attributeChips(attrs) {
  return Object.entries(attrs || {}).map(([name, value]) => {
    const text = `${name}=${valueText(value)}`;
    const chip = node("span", "sa-chip", text);
    chip.title = `${name} = ${valueText(value)}`;
    return chip;
  });
}

/** The search-attributes endpoint's catalogue as suggestions (custom ones first). */
export function suggestionList(data) {
  const out = [];
  for (const [custom, group] of [[true, data.custom || {}], [false, data.system || {}]]) {
    for (const name of Object.keys(group).sort()) out.push({ name, type: group[name], custom });
  }
  return out;
}
