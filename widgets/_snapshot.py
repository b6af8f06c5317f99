"""Static fallbacks: what a widget shows, as HTML, PNG and text, in its display data.

A notebook saved with widget outputs keeps, for each, the widget view's mime type (which
only a live kernel, or saved widget state, can render) and whatever else the display
data held. GitHub, nbviewer and nbconvert render only static types, so every widget adds
to the bundle ipywidgets gives it (``_repr_mimebundle_``) a static representation of
what it shows: ``text/html`` (an HTML table, every piece of user data escaped),
``image/png`` (the timeline) and a meaningful ``text/plain``.

Displayed through IPython, a widget's output carries a display id; when the widget stops
(:meth:`stop`, or its run closed) its output is updated with the final snapshot, so the
saved notebook shows how things ended, not how they started.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

__all__ = ["StaticDisplay", "html_table", "publish"]

log = logging.getLogger("widgets")

_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: The most rows a static table holds: the first and last half of them are kept.
MAX_STATIC_ROWS = 200

# Notebook renderers style tables in outputs themselves; GitHub drops style attributes.
_TABLE = 'style="border-collapse:collapse;font-size:12px"'
_HEAD = 'style="text-align:left"'
_FAILED = ' style="background:#fde8e8"'


def html_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    failed: Iterable[bool] | None = None,
) -> str:
    """An HTML table of ``rows`` (each cell escaped), failed rows shaded; rows past
    :data:`MAX_STATIC_ROWS` are left out in the middle, saying how many."""
    rows = list(rows)
    flags = list(failed) if failed is not None else [False] * len(rows)
    keep = list(range(len(rows)))
    skipped = 0
    if len(rows) > MAX_STATIC_ROWS:
        half = MAX_STATIC_ROWS // 2
        keep = list(range(half)) + list(range(len(rows) - half, len(rows)))
        skipped = len(rows) - MAX_STATIC_ROWS
    head = "".join(f"<th {_HEAD}>{escape(h)}</th>" for h in headers)
    body: list[str] = []
    for n, i in enumerate(keep):
        if skipped and n == MAX_STATIC_ROWS // 2:
            body.append(
                f'<tr><td colspan="{len(headers)}"><em>… {skipped} rows not shown</em></td></tr>'
            )
        shade = _FAILED if flags[i] else ""
        cells = "".join(f"<td>{escape(_text(v))}</td>" for v in rows[i])
        body.append(f"<tr{shade}>{cells}</tr>")
    if not rows:
        body.append(f'<tr><td colspan="{len(headers)}"><em>none</em></td></tr>')
    return f"<table {_TABLE}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def publish(data: dict[str, Any], metadata: dict[str, Any], display_id: str, update: bool) -> None:
    """Send a display (or an update of one) through IPython; nothing outside IPython."""
    if "IPython" not in sys.modules:
        return
    from IPython.display import display

    display(data, metadata=metadata, raw=True, display_id=display_id, update=update)  # type: ignore[no-untyped-call]


class StaticDisplay:
    """Mixed into a widget class (before the ipywidgets / anywidget base): its display
    data gains the static types the widget's ``_static_html`` / ``_static_png`` /
    ``_static_text`` give, and its output is updated once the widget stops."""

    #: Whether IPython has displayed the widget (so it has an output to update).
    _shown_static = False
    #: The static part of the bundle last published (an update that changes nothing
    #: is not sent: the front end would render the widget again for nothing).
    _published: dict[str, Any] | None = None

    def _static_text(self) -> str:
        return repr(self)

    def _static_html(self) -> str | None:
        return None

    def _static_png(self) -> str | None:
        """The PNG (base64) of the widget, or None."""
        return None

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None, **kwargs: Any
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        base = super()._repr_mimebundle_(include=include, exclude=exclude, **kwargs)  # type: ignore[misc]
        if base is None:
            return None
        data, metadata = base if isinstance(base, tuple) else (base, {})
        data, metadata = dict(data), dict(metadata or {})

        def wanted(mime: str) -> bool:
            return (not include or mime in include) and not (exclude and mime in exclude)

        for mime, make in (
            ("text/plain", self._static_text),
            ("text/html", self._static_html),
            ("image/png", self._static_png),
        ):
            if not wanted(mime):
                continue
            try:
                value = make()
            except Exception:  # a display must never fail over its fallback
                log.exception("could not draw the static %s of %s", mime, type(self).__name__)
                continue
            if value is not None:
                data[mime] = value
        return data, metadata

    @property
    def _display_id(self) -> str:
        return f"durable-widget-{self.model_id}"  # type: ignore[attr-defined]

    def _bundle(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        make = getattr(self, "_repr_mimebundle_", None)  # None once closed (ipywidgets)
        return make() if callable(make) else None

    def _ipython_display_(self, **_kwargs: Any) -> None:
        # The bundle of _repr_mimebundle_, under a display id: the output can be given
        # the final snapshot when the widget stops.
        bundle = self._bundle()
        if bundle is None:
            publish({"text/plain": repr(self)}, {}, self._display_id, False)
            return
        data, metadata = bundle
        publish(data, metadata, self._display_id, False)
        self._shown_static = True
        self._published = _static_part(data)

    def _publish_snapshot(self) -> None:
        """Update the widget's outputs (if IPython displayed it) with what it shows now."""
        if not self._shown_static or getattr(self, "comm", None) is None:
            return
        try:
            bundle = self._bundle()
            if bundle is None or _static_part(bundle[0]) == self._published:
                return
            publish(bundle[0], bundle[1], self._display_id, True)
            # An update sent from a background thread (a run's view closing by itself)
            # reaches a live front end, but a notebook executor (nbconvert, nbval) keeps
            # only messages sent while a cell runs: only the kernel thread's updates count
            # as published, so stop() in a later cell still writes the final state.
            if threading.current_thread() is threading.main_thread():
                self._published = _static_part(bundle[0])
        except Exception:
            log.exception("could not update the output of %s", type(self).__name__)


def _static_part(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != _WIDGET_VIEW}
