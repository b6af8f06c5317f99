"""The web UI's schedules in Chromium, against a ``jupyter server`` subprocess: the list
(paused state, next action, counts of started, skipped and missed actions) and a
schedule's page (spec, policy, state and note, counters, upcoming times, the action log
with skipped and missed actions marked with their reason, the buffered start, run links
to the run page; trigger, pause, unpause), all as text: a schedule id and a note made of
markup never run a script. Screenshots go to ``test-artifacts/`` and ``/tmp/shots/``."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    ScheduleState,
)
from engine.testing import WorkflowEnvironment

from ..widgets.test_schedule_view import XSS, mixed_schedule
from .chromium import ARTIFACTS, launch, require_chromium
from .test_web_ui import TOKEN, serve

ODD_ID = "<img src=x onerror=alert(1)>"
SHOTS = Path("/tmp/shots")


async def _seed(url: str) -> None:
    """``mixed`` (every kind of action, paused with a note of markup) and a schedule whose
    id is markup, paused, whose runs nobody works on."""
    async with await WorkflowEnvironment.start_time_skipping(database_url=url) as env:
        await mixed_schedule(env)
        await env.client.create_schedule(
            ODD_ID,
            Schedule(
                action=ScheduleActionStartWorkflow(
                    "Nightly", id="nightly", task_queue="nobody-polls"
                ),
                spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))]),
                state=ScheduleState(paused=True, note=XSS),
            ),
        )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    require_chromium()
    db_url = f"sqlite:///{tmp_path / 'durable.db'}"
    asyncio.run(_seed(db_url))
    yield from serve(tmp_path, db_url)


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def _no_markup_parsed(page: Any, dialogs: list[str]) -> None:
    assert dialogs == [], "data was inserted as HTML (an alert ran)"
    assert page.evaluate("window.__xss") is None, "data was inserted as HTML"
    assert page.locator("main img, header img").count() == 0


def test_schedules_list_and_page(server: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            dialogs: list[str] = []
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

            # -- the list ------------------------------------------------------------
            page.goto(f"{server}durable/?token={TOKEN}")
            page.get_by_role("link", name="Schedules", exact=True).click()
            expect(page.get_by_role("heading", name="Schedules", exact=True)).to_be_visible()
            table = page.locator("#schedules")
            mixed = table.locator("tr[data-id='mixed']")
            expect(mixed).to_be_visible()
            expect(mixed.locator(".sched-state")).to_have_text("paused")
            expect(mixed.locator("td").nth(2)).to_have_text("ThreeMinutes")
            expect(mixed.locator("td").nth(3)).to_have_text("every 1 min")
            expect(mixed.locator("td").nth(4)).to_have_text("— (paused)")
            for cell in ("started", "skipped", "missed"):
                text = mixed.locator(f"td[data-count='{cell}']").inner_text()
                assert int(text) > 0, (cell, text)
            expect(mixed.locator("td.count-skipped")).to_have_count(1)
            expect(mixed.locator("td.count-missed")).to_have_count(1)
            expect(mixed).to_contain_text(XSS)  # the note, as text
            odd = table.get_by_role("link", name=ODD_ID)
            expect(odd).to_be_visible()
            expect(page.locator("#schedules-caption")).to_have_text("2 schedules, by id")
            _no_markup_parsed(page, dialogs)
            _shot(page, "ui-schedules.png")

            # The list filter; a bad one is the server's message, with no stale rows.
            page.get_by_label("Find schedules").fill("ScheduleId = 'mixed'")
            page.get_by_label("Find schedules").press("Enter")
            expect(table.get_by_role("link", name=ODD_ID)).to_have_count(0)
            expect(mixed).to_be_visible()
            page.get_by_label("Find schedules").fill("ExecutionStatus = 'Running'")
            page.get_by_label("Find schedules").press("Enter")
            expect(page.get_by_role("alert")).to_contain_text('cannot filter on "ExecutionStatus"')
            expect(table.locator("tbody")).to_have_text(
                "No schedules: correct the filter above, or clear it."
            )
            expect(page.get_by_label("Find schedules")).to_have_attribute("aria-invalid", "true")
            page.get_by_role("button", name="Clear").click()
            expect(mixed).to_be_visible()
            expect(page.get_by_role("alert")).to_be_hidden()

            # -- the page of mixed -----------------------------------------------------
            table.get_by_role("link", name="mixed", exact=True).click()
            expect(page.get_by_role("heading", name="Schedule mixed")).to_be_visible()
            summary = page.locator("#schedule-summary")
            expect(summary).to_contain_text("ThreeMinutes")
            expect(summary).to_contain_text("every 1 min")
            expect(summary).to_contain_text("SKIP")
            expect(summary).to_contain_text("3 min")
            expect(summary.locator(".sched-note")).to_have_text(XSS)
            expect(summary.locator(".sched-state")).to_have_text("paused")
            counters = page.locator("#schedule-counters")
            for name in ("started", "skipped", "missed"):
                n = counters.locator(f"[data-counter='{name}'] .counter-n").inner_text()
                assert int(n) > 0, (name, n)
            expect(counters.locator("[data-counter='waiting'] .counter-n")).to_have_text("1")
            expect(page.locator("#schedule-upcoming li")).to_have_count(10)
            expect(page.locator("#upcoming-paused")).to_be_visible()
            log = page.locator("#schedule-log")
            skipped = log.locator("tr[data-kind='skipped']")
            missed = log.locator("tr[data-kind='missed']")
            expect(skipped.first).to_contain_text("skipped (overlap)")
            expect(skipped.first).to_contain_text("a run of this schedule is still open (SKIP)")
            expect(missed.first).to_contain_text("missed (catch-up window)")
            expect(missed.first).to_contain_text("past the catch-up window of 180s")
            waiting = log.locator("tr[data-kind='waiting']")
            expect(waiting).to_have_count(1)
            expect(waiting).to_contain_text("buffered: starts when the open run closes")
            started = log.locator("tr[data-kind='started']")
            expect(started.locator(".status.COMPLETED").first).to_be_visible()
            expect(started.locator(".status.RUNNING")).to_have_count(1)
            # The skipped and missed rows stand out (their own background).
            colours = {
                kind: log.locator(f"tr[data-kind='{kind}'] td").first.evaluate(
                    "td => getComputedStyle(td).backgroundColor"
                )
                for kind in ("skipped", "missed", "started")
            }
            assert len(set(colours.values())) == 3, colours
            expect(page.locator("#schedule-log-caption")).to_contain_text("skipped by overlap")
            expect(page.locator("#schedule-legend li")).to_have_count(7)
            _no_markup_parsed(page, dialogs)
            _shot(page, "ui-schedule.png")

            # A run id links to the run's page.
            link = started.first.locator("a")
            workflow_id = link.inner_text()
            link.click()
            expect(page.get_by_role("heading", name=f"Workflow {workflow_id}")).to_be_visible()
            assert re.search(r"#/workflows/report-[^?]+\?run_id=", page.url), page.url
            page.go_back()
            expect(page.get_by_role("heading", name="Schedule mixed")).to_be_visible()

            # -- the page of the schedule whose id is markup: trigger, unpause, pause ----
            page.get_by_role("link", name="All schedules").click()
            page.locator("#schedules").get_by_role("link", name=ODD_ID).click()
            expect(page.get_by_role("heading", level=1)).to_have_text(f"Schedule {ODD_ID}")
            expect(page.locator("#schedule-log tbody")).to_have_text("No action time has come yet.")
            expect(page.get_by_role("button", name="Pause", exact=True)).to_be_disabled()
            page.get_by_role("button", name="Trigger now").click()
            expect(log.locator("tr[data-kind='started']")).to_have_count(1)
            expect(log.locator("tr[data-kind='started']")).to_contain_text("trigger")
            expect(log.locator("tr[data-kind='started'] a")).to_have_text(
                re.compile(r"^nightly-\d{4}-")
            )
            # Once more under SKIP while that run is open: skipped, and said why.
            page.get_by_label("Overlap").select_option("SKIP")
            page.get_by_role("button", name="Trigger now").click()
            expect(log.locator("tr[data-kind='skipped']")).to_contain_text("still open (SKIP)")
            page.get_by_label("Note").fill("back on")
            page.get_by_role("button", name="Unpause").click()
            expect(summary.locator(".sched-state")).to_have_text("active")
            expect(summary.locator(".sched-note")).to_have_text("back on")
            expect(page.get_by_role("button", name="Unpause")).to_be_disabled()
            page.get_by_label("Note").fill(ODD_ID)
            page.get_by_role("button", name="Pause", exact=True).click()
            expect(summary.locator(".sched-state")).to_have_text("paused")
            expect(summary.locator(".sched-note")).to_have_text(ODD_ID)
            page.wait_for_timeout(2500)  # a live refresh later: the same
            expect(summary.locator(".sched-note")).to_have_text(ODD_ID)
            _no_markup_parsed(page, dialogs)
            _shot(page, "ui-schedule-odd-id.png")

            # An unknown schedule: only the error.
            page.evaluate("location.hash = '#/schedules/no-such-schedule'")
            expect(page.get_by_role("alert")).to_contain_text("no-such-schedule")
            expect(page.locator("#schedule-body")).to_be_hidden()
            assert errors == []
        finally:
            browser.close()
