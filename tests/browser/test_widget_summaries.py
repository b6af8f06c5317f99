"""The Timeline and HistoryView front ends drawing the user's summaries, in Chromium.

Each widget's ES module (``widgets/_static.esm``) renders into a blank page against a
stand-in for anywidget's model holding the state the Python widget computed for the golden
history with summaries (its activity's summary made markup): the summaries are drawn, as
text. Screenshots go to ``test-artifacts/`` (and ``/tmp/shots/``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from widgets import HistoryView, Timeline
from widgets._static import CSS, esm

from ..widgets.test_summaries import golden
from .chromium import ARTIFACTS, launch, require_chromium

XSS_SUMMARY = "greet <b>x</b><img src=x onerror=window.__xss=1>"

# Renders the module's default export into #w with a model that only reads `state`
# (and stores what the view sets).
MOUNT = """async ([code, state]) => {
  const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
  const mod = await import(url);
  const model = {
    get: (k) => state[k], set: (k, v) => { state[k] = v; }, save_changes() {},
    send() {}, on() {}, off() {},
  };
  mod.default.render({ model, el: document.getElementById("w") });
}"""


def _state(widget: Any) -> dict[str, Any]:
    state = {k: getattr(widget, k) for k in widget.keys if not k.startswith("_")}
    return json.loads(json.dumps(state, default=str))


def _mount(page: Any, module: str, state: dict[str, Any]) -> None:
    css = CSS.read_text(encoding="utf-8")
    page.set_content(
        f"<!doctype html><html><head><style>{css}</style></head>"
        '<body style="margin:12px"><div id="w" style="width:1000px"></div></body></html>'
    )
    page.evaluate(MOUNT, [esm(module), state])


def test_timeline_and_history_view_draw_summaries_as_text() -> None:
    from playwright.sync_api import expect, sync_playwright

    require_chromium()
    history = golden(activity_summary=XSS_SUMMARY)
    line, table = Timeline(history), HistoryView(history)
    try:
        timeline_state, table_state = _state(line), _state(table)
    finally:
        line.close()
        table.close()
    ARTIFACTS.mkdir(exist_ok=True)
    shots = Path("/tmp/shots")
    shots.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1040, "height": 420})
            errors: list[str] = []
            page.on("pageerror", lambda err: errors.append(str(err)))

            _mount(page, "timeline.js", timeline_state)
            widget = page.locator("#w")
            expect(widget.locator(".dn-run-summary")).to_have_text("Greets **Temporal**")
            details = widget.locator(".dn-run-details")
            expect(details.locator(".dn-run-details-text")).to_be_hidden()  # closed
            details.locator("summary").click()
            expect(details.locator(".dn-run-details-text")).to_have_text(
                "Four greetings:\n- an activity\n- a local one\n- a child"
            )
            notes = widget.locator("text.dn-lane-summary")
            expect(notes.first).to_be_visible()
            texts = notes.all_text_contents()
            assert "a short nap" in texts and "the child" in texts, texts
            assert any(t.startswith("greet <b>x</b>") for t in texts), texts
            page.screenshot(path=str(ARTIFACTS / "widget-timeline-summaries.png"))
            page.screenshot(path=str(shots / "widget-timeline-summaries.png"))
            assert page.evaluate("window.__xss") is None
            assert page.locator("#w b, #w img").count() == 0

            _mount(page, "history_view.js", table_state)
            expect(widget.locator(".dn-run-summary")).to_have_text("Greets **Temporal**")
            cells = widget.locator(".dn-usum")
            expect(cells.filter(has_text=XSS_SUMMARY)).to_have_count(1)
            expect(cells.filter(has_text="the child")).to_have_count(1)
            page.screenshot(path=str(ARTIFACTS / "widget-history-summaries.png"))
            page.screenshot(path=str(shots / "widget-history-summaries.png"))
            assert page.evaluate("window.__xss") is None
            assert page.locator("#w b, #w img").count() == 0
            assert errors == []
        finally:
            browser.close()
