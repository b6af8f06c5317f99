"""The ScheduleView front end in Chromium: every kind of mark drawn, hover text, legend,
counters, paused state and note, all as text.

The widget's ES module renders into a blank page against a stand-in for anywidget's model
holding the state the Python widget computed for a schedule with every kind of mark
(``tests/widgets/test_schedule_view.mixed_schedule``: started, skipped by overlap, missed
after downtime, buffered, upcoming; paused with a note that is markup). Screenshots go to
``test-artifacts/widget-schedule-view.png`` (and ``/tmp/shots/``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from engine.testing import WorkflowEnvironment
from widgets import ScheduleView

from ..widgets.test_schedule_view import XSS, mixed_schedule
from .chromium import ARTIFACTS, launch, require_chromium
from .test_widget_summaries import _mount, _state


def _view_state(tmp_path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    async def build() -> tuple[dict[str, Any], dict[str, int]]:
        url = f"sqlite:///{tmp_path / 'durable.db'}"
        async with await WorkflowEnvironment.start_time_skipping(database_url=url) as env:
            client = await mixed_schedule(env)
            view = ScheduleView(client, "mixed")
            try:
                view.stop()
                state = _state(view)
                counts: dict[str, int] = {}
                for mark in view.marks:
                    counts[mark["kind"]] = counts.get(mark["kind"], 0) + 1
                return state, counts
            finally:
                view.close()

    return asyncio.run(build())


def test_schedule_view_draws_every_kind_of_mark(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    require_chromium()
    state, counts = _view_state(tmp_path)
    assert {"started", "skipped", "missed", "waiting", "upcoming"} <= set(counts), counts
    ARTIFACTS.mkdir(exist_ok=True)
    shots = Path("/tmp/shots")
    shots.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1040, "height": 760})
            errors: list[str] = []
            page.on("pageerror", lambda err: errors.append(str(err)))
            _mount(page, "schedule_view.js", state)
            widget = page.locator("#w")
            expect(widget.locator(".dn-title")).to_have_text("Schedule mixed")
            expect(widget.locator(".dn-sv-state")).to_have_text("paused")
            # The note is the user's text: shown as text, never as markup.
            expect(widget.locator(".dn-sv-note")).to_have_text(f"note: {XSS}")
            for kind, n in counts.items():
                expect(widget.locator(f"g.dn-sv-mark[data-kind='{kind}']")).to_have_count(n)
            # Started ones in their run's status colour, the runs as bars.
            statuses = widget.locator("g.dn-sv-mark[data-kind='started']").evaluate_all(
                "gs => gs.map(g => g.dataset.status)"
            )
            assert "completed" in statuses and "running" in statuses, statuses
            expect(widget.locator("g.dn-sv-run")).to_have_count(counts["started"])
            # Hover text says what became of each time, and why.
            skipped = widget.locator("g.dn-sv-mark[data-kind='skipped'] > title").first
            assert "skipped overlap" in skipped.text_content()
            assert "a run of this schedule is still open (SKIP)" in skipped.text_content()
            missed = widget.locator("g.dn-sv-mark[data-kind='missed'] > title").first
            assert "past the catch-up window of 180s" in missed.text_content()
            waiting = widget.locator("g.dn-sv-mark[data-kind='waiting'] > title").first
            assert "buffered: starts when the open run closes" in waiting.text_content()
            # The legend explains every mark; the counters are describe()'s.
            keys = widget.locator(".dn-sv-key[data-kind]")
            expect(keys).to_have_count(7)
            assert "catch-up window" in (
                widget.locator(".dn-sv-key[data-kind='missed']").get_attribute("title") or ""
            )
            c = state["data"]["counters"]
            expect(widget.locator(".dn-sv-counter[data-key='num_actions'] strong")).to_have_text(
                str(c["num_actions"])
            )
            skipped_n = widget.locator(
                ".dn-sv-counter[data-key='num_actions_skipped_overlap'] strong"
            )
            expect(skipped_n).to_have_text(str(c["num_actions_skipped_overlap"]))
            missed_n = widget.locator(
                ".dn-sv-counter[data-key='num_actions_missed_catchup_window'] strong"
            )
            expect(missed_n).to_have_text(str(c["num_actions_missed_catchup_window"]))
            # The table lists the logged times, newest first.
            rows = widget.locator(".dn-sv-row[data-kind]")
            logged = sum(n for k, n in counts.items() if k not in ("upcoming", "waiting"))
            expect(rows).to_have_count(logged)
            expect(widget.locator(".dn-sv-row[data-kind='missed']").first).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "widget-schedule-view.png"), full_page=True)
            page.screenshot(path=str(shots / "widget-schedule-view.png"), full_page=True)
            assert page.evaluate("window.__xss") is None
            assert page.locator("#w b, #w img").count() == 0
            assert errors == []
        finally:
            browser.close()
