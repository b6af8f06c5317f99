"""The replay stepper's pure view: snapshots and events → HTML fragments and plain text.

Nothing here holds a widget or runs a replay: :class:`widgets.stepper.ReplayStepper` puts
what these functions return into its HTML children, and the tests check them without a
browser. Every piece of text that comes from the history or the workflow code (event
attributes, reprs of locals, source lines, error messages) is escaped here.
"""

from __future__ import annotations

import linecache
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from html import escape
from pathlib import Path
from typing import Any

from engine import HistoryEvent, NondeterminismError
from engine.worker import Snapshot

from ._snapshot import html_table
from ._static import CSS
from .models import event_summary, is_failure

__all__ = [
    "Breakpoints",
    "banner_html",
    "banner_text",
    "header_html",
    "history_html",
    "history_window",
    "parse_breakpoints",
    "position_label",
    "source_html",
    "source_listing",
    "source_name",
    "state_html",
    "static_html",
    "static_text",
    "style_html",
]


#: The most source lines shown at once (the whole function the current line is in,
#: unless it is longer: then a window of this many around the line).
MAX_SOURCE_LINES = 150
#: Source lines and history events either side of the current one in the static snapshot.
STATIC_AROUND = 5
#: The most commands listed (the latest ones; a long history matches thousands).
MAX_COMMANDS = 25
_TOKEN = re.compile(r"#?\d+|[A-Za-z_]\w*")
_DEF = re.compile(r"\s*(async\s+)?def\s+(\w+)\b")


@lru_cache(maxsize=1)
def style_html() -> str:
    """A ``<style>`` element with the widgets' stylesheet (``static/widgets.css``).

    ipywidgets' HTML children do not load the css file the anywidget views ship, so the
    stepper puts it inline once; every rule in it is scoped by a ``dn-`` class.
    """
    try:
        css = CSS.read_text()
    except OSError:  # an installation without the static folder still works, unstyled
        return ""
    # A stylesheet never holds "</", but nothing may end the <style> element early.
    css = css.replace("</", "<\\/")
    return f"<style>{css}</style>"


# -- breakpoints -------------------------------------------------------------------------


@dataclass(frozen=True)
class Breakpoints:
    """Where ``run to breakpoint`` stops: after an event with one of these ids or types."""

    event_ids: frozenset[int] = field(default_factory=frozenset)
    event_types: frozenset[str] = field(default_factory=frozenset)

    def __bool__(self) -> bool:
        return bool(self.event_ids or self.event_types)

    def matches(self, event: HistoryEvent) -> bool:
        """Whether ``event`` is a breakpoint."""
        return event.event_id in self.event_ids or event.event_type in self.event_types

    def describe(self) -> str:
        """The breakpoints as the input box spells them (ids first, then types)."""
        return ", ".join([str(i) for i in sorted(self.event_ids)] + sorted(self.event_types))


def parse_breakpoints(spec: str | Iterable[int | str]) -> tuple[Breakpoints, list[str]]:
    """Breakpoints from ``"5, TimerFired"`` (or ``[5, "TimerFired"]``), and the parts that
    are neither an event id nor an event type name."""
    items: list[str]
    if isinstance(spec, str):
        items = [part.strip() for part in re.split(r"[,;\s]+", spec)]
    else:
        items = [str(part).strip() for part in spec]
    ids: set[int] = set()
    types: set[str] = set()
    bad: list[str] = []
    for item in items:
        if not item:
            continue
        if not _TOKEN.fullmatch(item):
            bad.append(item)
        elif item.lstrip("#").isdigit():
            ids.add(int(item.lstrip("#")))
        else:
            types.add(item)
    return Breakpoints(frozenset(ids), frozenset(types)), bad


# -- source file names -------------------------------------------------------------------

_IPYTHON_INPUT = re.compile(r"<ipython-input-(\d+)-[0-9a-f]+>")


def _cell_number(filename: str) -> int | None:
    """The execution count of the IPython cell compiled as ``filename``, if it is one.

    IPython names the code of each cell (``/tmp/ipykernel_123/3717557294.py`` in a
    kernel, ``<ipython-input-12-…>`` in a terminal) and keeps the execution count of
    each name in its compiler's ``_filename_map``. IPython is only looked at when it is
    already loaded: outside it, no file is a cell.
    """
    found = _IPYTHON_INPUT.fullmatch(filename)
    if found:
        return int(found.group(1))
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        shell = ipython.get_ipython()
    except Exception:  # an IPython half torn down: no names to be had
        return None
    mapping = getattr(getattr(shell, "compile", None), "_filename_map", None)
    number = mapping.get(filename) if isinstance(mapping, dict) else None
    return number if isinstance(number, int) else None


def source_name(filename: str) -> str:
    """What a source file is called in the stepper: ``In [12]`` for the code of an
    IPython cell, else the file's name (``orders.py``)."""
    number = _cell_number(filename)
    return f"In [{number}]" if number is not None else Path(filename).name


# -- position ----------------------------------------------------------------------------


def position_label(events: Sequence[HistoryEvent], position: int) -> str:
    """What the slider stands on: the event applied last, or the start."""
    if position <= 0 or not events:
        return f"start · 0/{len(events)}"
    event = events[min(position, len(events)) - 1]
    return f"event {event.event_id} · {event.event_type} · {position}/{len(events)}"


def replay_state(snap: Snapshot) -> tuple[str, str]:
    """The replay's state (``replaying``, ``diverged``, ``completed``, ``end of
    history``) and the colour of its chip."""
    if snap.diverged is not None:
        return "diverged", "#e03131"
    if snap.completed:
        return "completed", "#2b8a3e"
    if snap.at_end:
        return "end of history", "#495057"
    return "replaying", "#1971c2"


def _workflow_time(snap: Snapshot) -> str:
    return snap.workflow_time.isoformat(timespec="seconds") if snap.workflow_time else "-"


def header_html(
    workflow_id: str, workflow_type: str, snap: Snapshot, note: str = "", summary: str = ""
) -> str:
    """The title line: the run, how far the replay is, and its state as a chip; under it
    the run's static ``summary`` (escaped: the user's text, never markup)."""
    state, colour = replay_state(snap)
    time = _workflow_time(snap)
    parts = [
        '<div class="dn-head">',
        f'<span class="dn-title">Replay of {escape(workflow_id)} · {escape(workflow_type)}</span>',
        f'<span class="dn-chip dn-st-state" style="background:{colour}">{state}</span>',
        f'<span class="dn-counts">event {snap.position} of {snap.total}'
        f" · workflow time {escape(time)}</span>",
        "</div>",
    ]
    if summary:
        parts.append(f'<div class="dn-run-summary">{escape(summary)}</div>')
    if note:
        parts.append(f'<div class="dn-note dn-st-note">{escape(note)}</div>')
    return "".join(parts)


def summary_text(event: HistoryEvent, summaries: Mapping[int, str] | None = None) -> str:
    """An event's summary cell: the user's summary (``summaries``: decoded by event id, see
    :func:`widgets.models.user_metadata`) before what :func:`event_summary` says."""
    user = (summaries or {}).get(event.event_id, "")
    return " · ".join(p for p in (user, event_summary(event)) if p)


# -- divergence banner -------------------------------------------------------------------


def _current_line(snap: Snapshot) -> str:
    src = snap.source
    if src is None:
        return ""
    where = f"{source_name(src.filename)}:{src.line} in {src.function}()"
    text = next((t for n, t in src.context if n == src.line), "").strip()
    return f"{where}: {text}" if text else where


def _banner(snap: Snapshot) -> tuple[str, list[tuple[str, str]]] | None:
    err = snap.diverged
    if err is None:
        return None
    if isinstance(err, NondeterminismError):
        event_id = err.event_id if err.event_id is not None else snap.position
        title = f"Non-determinism at event {event_id}"
        rows = [("history recorded", err.recorded or "?"), ("code produced", err.produced or "?")]
    else:
        event_id = snap.event.event_id if snap.event is not None else snap.position
        title = f"Workflow code raised {type(err).__name__} at event {event_id}"
        rows = [("error", str(err))]
    where = _current_line(snap)
    if where:
        rows.append(("at", where))
    return title, rows


def banner_text(snap: Snapshot) -> str | None:
    """The divergence banner in plain text, or None while the code agrees with history.

    Names the event, what history recorded there, what the code produced instead, and the
    line of workflow code that produced it.
    """
    parts = _banner(snap)
    if parts is None:
        return None
    title, rows = parts
    return "\n".join([title] + [f"{label}: {value}" for label, value in rows])


def banner_html(snap: Snapshot) -> str:
    """The divergence banner (``role="alert"``), or an empty string."""
    parts = _banner(snap)
    if parts is None:
        return ""
    title, rows = parts
    body = "".join(
        f"<div><b>{escape(label)}:</b> <code>{escape(value)}</code></div>" for label, value in rows
    )
    err = snap.diverged
    advice = err.message if isinstance(err, NondeterminismError) else ""
    more = f'<div class="dn-note">{escape(advice)}</div>' if advice else ""
    return (
        f'<div class="dn-banner dn-st-banner" role="alert">'
        f"<strong>{escape(title)}</strong>{body}{more}</div>"
    )


# -- source ------------------------------------------------------------------------------


def source_listing(
    snap: Snapshot, lines: Sequence[str] | None = None, limit: int = MAX_SOURCE_LINES
) -> list[tuple[int, str]]:
    """The lines to show: the whole function the code waits in (from ``lines``, the file's
    text, read through :mod:`linecache` when not given), at most ``limit`` lines around the
    current one; the snapshot's few lines of context when the file cannot be read."""
    src = snap.source
    if src is None:
        return []
    if lines is None:
        lines = linecache.getlines(src.filename)
    if not 0 < src.line <= len(lines):
        return list(src.context)
    at = src.line - 1
    start = at
    while start >= 0:  # up to the ``def`` of the function, then its decorators
        found = _DEF.match(lines[start])
        if found and found.group(2) == src.function:
            break
        start -= 1
    if start < 0:
        return list(src.context)
    indent = len(lines[start]) - len(lines[start].lstrip())
    while start > 0 and lines[start - 1].strip().startswith("@"):
        start -= 1
    end = at + 1
    while end < len(lines):
        text = lines[end]
        if text.strip() and len(text) - len(text.lstrip()) <= indent:
            break
        end += 1
    while end > at + 1 and not lines[end - 1].strip():
        end -= 1
    if end - start > limit:  # a long function: a window with the current line in it
        start = max(start, min(at - limit // 3, end - limit))
        end = start + limit
    return [(n + 1, lines[n].rstrip("\r\n")) for n in range(start, end)]


def source_html(snap: Snapshot, listing: Sequence[tuple[int, str]] | None = None) -> str:
    """The workflow source with line numbers, the line where the code waits highlighted."""
    src = snap.source
    if src is None:
        why = _no_source(snap)
        return f'<div class="dn-st-section"><div class="dn-note">{why}</div></div>'
    listing = source_listing(snap) if listing is None else listing
    rows = []
    for number, text in listing:
        current = number == src.line
        cls = "dn-src-line dn-src-current" if current else "dn-src-line"
        aria = ' aria-current="step"' if current else ""
        mark = "▶" if current else " "
        rows.append(
            f'<span class="{cls}"{aria}><span class="dn-src-no">{mark}{number:>4}</span> '
            f"{escape(text)}</span>"
        )
    head = (
        f'<div class="dn-st-h">{escape(source_name(src.filename))}:{src.line} in '
        f"<code>{escape(src.function)}()</code></div>"
    )
    body = "".join(rows) or '<span class="dn-note">(source not available)</span>'
    section = "dn-st-section dn-st-diverged" if snap.diverged is not None else "dn-st-section"
    return (
        f'<div class="{section}">{head}<pre class="dn-src" '
        f'title="{escape(src.filename)}">{body}</pre></div>'
    )


# -- state: locals, attributes, pending work, commands -----------------------------------


def _table(title: str, rows: Iterable[tuple[str, str]], empty: str) -> str:
    body = "".join(
        f"<tr><th>{escape(name)}</th><td><code>{escape(value)}</code></td></tr>"
        for name, value in rows
    )
    if not body:
        return f'<div class="dn-st-h">{escape(title)}</div><div class="dn-note">{empty}</div>'
    return f'<div class="dn-st-h">{escape(title)}</div><table class="dn-kv">{body}</table>'


def _pending(snap: Snapshot) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for timer in snap.pending_timers:
        fires = timer.get("fires_at")
        when = fires.isoformat(timespec="seconds") if isinstance(fires, datetime) else fires
        rows.append((f"timer {timer.get('timer_id')}", f"fires at {when}"))
    for act in snap.pending_activities:
        scheduled = act.get("scheduled_event_id")
        where = f"scheduled at event {scheduled}" if scheduled else "not yet scheduled"
        rows.append(
            (f"activity {act.get('activity_type')}", f"id {act.get('activity_id')}, {where}")
        )
    if snap.running_handlers:
        rows.append(("handlers", f"{snap.running_handlers} running"))
    if snap.waiting_conditions:
        rows.append(("wait_condition", f"{snap.waiting_conditions} waiting"))
    return rows


def _commands(snap: Snapshot) -> str:
    commands = snap.commands[-MAX_COMMANDS:]
    skipped = len(snap.commands) - len(commands)
    items = []
    # A command no event has matched yet is the next step, until the code diverges: then
    # it is the one the code produced instead of what history recorded.
    flag = "dn-st-unmatched" if snap.diverged is not None else "dn-st-next"
    for c in commands:
        unmatched = c.event_id is None
        cls = f' class="{flag}"' if unmatched else ""
        tail = " (produced, no event matched yet)" if unmatched else ""
        items.append(
            f"<li{cls}><code>{escape(c.description)}</code>"
            f'<span class="dn-note"> task at event {c.activation_event_id}{tail}</span></li>'
        )
    head = '<div class="dn-st-h">Commands</div>'
    if not items:
        return head + '<div class="dn-note">No commands yet.</div>'
    more = f'<div class="dn-note">… {skipped} earlier</div>' if skipped else ""
    return f'{head}{more}<ol class="dn-st-cmds" start="{skipped + 1}">{"".join(items)}</ol>'


def state_html(snap: Snapshot) -> str:
    """Locals, attributes, pending timers / activities / handlers, and the commands."""
    return (
        '<div class="dn-st-section">'
        + _table("Locals", snap.locals.items(), "No local variables here.")
        + _table("Attributes", snap.attributes.items(), "No attributes.")
        + _table("Waiting on", _pending(snap), "Nothing pending.")
        + _commands(snap)
        + "</div>"
    )


# -- history -----------------------------------------------------------------------------


def history_window(events: Sequence[Any] | int, position: int, size: int) -> tuple[int, int]:
    """The ``[start, stop)`` indices of at most ``size`` events around the current one
    (index ``position - 1``), centred on it where the history allows."""
    count = events if isinstance(events, int) else len(events)
    size = max(1, size)
    current = max(0, min(position, count) - 1)
    start = max(0, min(current - (size - 1) // 2, count - size))
    return start, min(count, start + size)


def history_html(
    events: Sequence[HistoryEvent],
    position: int,
    *,
    size: int = 21,
    breakpoints: Breakpoints | None = None,
    diverged_at: int | None = None,
    summaries: Mapping[int, str] | None = None,
) -> str:
    """The history around the current event as a table: applied events, the current one
    highlighted, those not yet applied muted, breakpoints and the divergence marked
    (``summaries``: the user's, by event id, shown first in the summary cell)."""
    start, stop = history_window(events, position, size)
    rows = []
    for index in range(start, stop):
        event = events[index]
        classes = []
        if index < position - 1:
            classes.append("dn-done")
        elif index == position - 1:
            classes.append("dn-current")
        else:
            classes.append("dn-future")
        if is_failure(event.event_type):
            classes.append("dn-failed")
        if diverged_at is not None and event.event_id == diverged_at:
            classes.append("dn-diverged")
        bp = breakpoints is not None and breakpoints.matches(event)
        mark = '<span class="dn-bp" title="breakpoint">●</span>' if bp else ""
        aria = ' aria-current="step"' if index == position - 1 else ""
        rows.append(
            f'<tr class="{" ".join(classes)}"{aria} data-event-id="{event.event_id}">'
            f'<td class="dn-id">{mark}{event.event_id}</td>'
            f"<td>{escape(event.event_type)}</td>"
            f'<td class="dn-c">{escape(summary_text(event, summaries))}</td></tr>'
        )
    head = '<tr class="dn-colhead"><th>id</th><th>type</th><th>summary</th></tr>'
    shown = f"events {start + 1} to {stop} of {len(events)}" if events else "no events"
    return (
        f'<div class="dn-st-section"><div class="dn-st-h">History '
        f'<span class="dn-note">{shown}</span></div>'
        f'<table class="dn-st-history">{head}{"".join(rows)}</table></div>'
    )


# -- static snapshot (a saved notebook's fallback) ---------------------------------------


def _source_window(snap: Snapshot, around: int) -> list[tuple[int, str]]:
    src = snap.source
    if src is None:
        return []
    return [(n, t) for n, t in source_listing(snap) if abs(n - src.line) <= around]


def static_html(
    workflow_id: str,
    workflow_type: str,
    snap: Snapshot,
    events: Sequence[HistoryEvent],
    *,
    around: int = STATIC_AROUND,
    summaries: Mapping[int, str] | None = None,
) -> str:
    """What the stepper shows, as HTML that needs no style sheet nor script: the run and
    position, the divergence banner, the source around the current line, and the events
    around the current one (every piece of user text escaped)."""
    state, _colour = replay_state(snap)
    parts = [
        '<div class="dn-static dn-stepper">',
        f"<p><strong>Replay of {escape(workflow_id)} · {escape(workflow_type)}</strong>"
        f" · {state} · event {snap.position} of {snap.total}"
        f" · workflow time {escape(_workflow_time(snap))}</p>",
    ]
    banner = _banner(snap)
    if banner is not None:
        title, rows = banner
        lines = "".join(f"<br><b>{escape(k)}:</b> <code>{escape(v)}</code>" for k, v in rows)
        parts.append(
            '<p role="alert" style="border:1px solid #e03131;padding:4px 8px">'
            f"<strong>{escape(title)}</strong>{lines}</p>"
        )
    src = snap.source
    if src is not None:
        listing = _source_window(snap, around)
        text = "\n".join(f"{'▶' if n == src.line else ' '}{n:>4}  {line}" for n, line in listing)
        parts.append(
            f"<p>{escape(source_name(src.filename))}:{src.line} in "
            f"<code>{escape(src.function)}()</code></p>"
            f"<pre>{escape(text) or '(source not available)'}</pre>"
        )
    else:
        parts.append(f"<p><em>{escape(_no_source(snap))}</em></p>")
    start, stop = history_window(events, snap.position, 2 * around + 1)
    current = snap.position - 1
    parts.append(
        html_table(
            ["", "id", "type", "summary"],
            [
                (
                    "▶" if i == current else "",
                    events[i].event_id,
                    events[i].event_type,
                    summary_text(events[i], summaries),
                )
                for i in range(start, stop)
            ],
            failed=[is_failure(events[i].event_type) for i in range(start, stop)],
        )
    )
    parts.append(
        f"<p>events {start + 1} to {stop} of {len(events)}</p></div>" if events else "</div>"
    )
    return "".join(parts)


def _no_source(snap: Snapshot) -> str:
    if snap.completed:
        return "The workflow code has returned: the run is complete."
    if snap.position == 0:
        return "Before the first event: no workflow code has run yet."
    return "The workflow code is not waiting anywhere yet (no workflow task so far)."


def static_text(workflow_id: str, workflow_type: str, snap: Snapshot) -> str:
    """The stepper's state in a few lines of plain text."""
    state, _colour = replay_state(snap)
    lines = [
        f"Replay of {workflow_id} · {workflow_type} · {state} · event {snap.position} of {snap.total}"
    ]
    if snap.event is not None:
        lines.append(f"event {snap.event.event_id}: {snap.event.event_type}")
    where = _current_line(snap)
    if where:
        lines.append(f"code at {where}")
    if snap.locals:
        lines.append("locals: " + ", ".join(f"{k}={v}" for k, v in snap.locals.items()))
    banner = banner_text(snap)
    if banner:
        lines.append(banner)
    return "\n".join(lines)
