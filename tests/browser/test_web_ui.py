"""The web UI in a real browser: Debian's Chromium driven by Playwright, against a real
``jupyter server`` subprocess with a token. Screenshots go to ``test-artifacts/``.

Needs ``/usr/bin/chromium`` (``apt-get install -y chromium``); never ``playwright install``.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from engine import ApplicationError, Client, Worker, WorkflowFailureError, activity, workflow

from .chromium import ARTIFACTS, free_port, launch, require_chromium

TOKEN = "browser-test-token"


@activity.defn
async def pack(item: str) -> str:
    """Packs an item."""
    return f"packed {item}"


@workflow.defn
class Shipment:
    """A timer, then an activity."""

    @workflow.run
    async def run(self, item: str) -> str:
        await workflow.sleep(timedelta(milliseconds=20))
        return await workflow.execute_activity(
            pack, args=[item], start_to_close_timeout=timedelta(seconds=10)
        )


@workflow.defn(name="Swap")
class SwapTimerFirst:
    """The seed's worked case, as first deployed: a long timer, then an activity."""

    @workflow.run
    async def run(self, item: str) -> str:
        await workflow.sleep(timedelta(hours=1))
        return await workflow.execute_activity(
            pack, args=[item], start_to_close_timeout=timedelta(seconds=10)
        )


@workflow.defn(name="Swap")
class SwapActivityFirst:
    """The same type redeployed with the two steps swapped."""

    @workflow.run
    async def run(self, item: str) -> str:
        packed = await workflow.execute_activity(
            pack, args=[item], start_to_close_timeout=timedelta(seconds=10)
        )
        await workflow.sleep(timedelta(hours=1))
        return packed


@activity.defn
async def refuse(item: str) -> str:
    """Fails for good, with markup in its message."""
    raise ApplicationError(f"{XSS_FAILURE} refused {item}", type="Refused", non_retryable=True)


@workflow.defn
class Refusal:
    """One activity that fails: the run fails with the activity's message."""

    @workflow.run
    async def run(self, item: str) -> str:
        return await workflow.execute_activity(
            refuse, args=[item], start_to_close_timeout=timedelta(seconds=10)
        )


# Markup where the UI shows an id, a payload or a failure message: each sets a flag if
# the page ever parses it as HTML.
XSS_ID = '<img src=x onerror="window.__xss=1">'
XSS_INPUT = "<img src=x onerror=window.__xss=2>"
XSS_FAILURE = "<img src=x onerror=window.__xss=3>"
XSS_FILTER = "<img src=x onerror=window.__xss=4>"


def _no_markup_parsed(page: Any) -> None:
    assert page.evaluate("window.__xss") is None, "data was inserted as HTML"
    assert page.locator("main img, header img").count() == 0


async def _until_event(handle: Any, event_type: str) -> None:
    for _ in range(500):
        if any(e.event_type == event_type for e in (await handle.fetch_history()).events):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {event_type}")


async def _populate(url: str) -> None:
    async with await Client.connect(url) as client:
        async with Worker(client, task_queue="ship", workflows=[Shipment], activities=[pack]):
            await client.execute_workflow(
                Shipment.run, "teapot", id="shipment-teapot", task_queue="ship"
            )
        # No worker polls this queue: it stays Running, with a pending workflow task.
        await client.start_workflow(
            "Shipment", args=["kettle"], id="shipment-kettle", task_queue="nobody-polls"
        )
        # A run waiting on its timer meets code with the steps swapped: its next workflow
        # task (woken by a signal) fails with a non-determinism error.
        async with Worker(client, task_queue="swap", workflows=[SwapTimerFirst], activities=[pack]):
            swap = await client.start_workflow("Swap", args=["cup"], id="swap-1", task_queue="swap")
            await _until_event(swap, "TimerStarted")
        async with Worker(
            client, task_queue="swap", workflows=[SwapActivityFirst], activities=[pack]
        ):
            await swap.signal("poke")
            await _until_event(swap, "WorkflowTaskFailed")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A ``jupyter server`` on loopback with the extension on a fresh store; its URL."""
    require_chromium()
    db_url = f"sqlite:///{tmp_path / 'durable.db'}"
    asyncio.run(_populate(db_url))
    yield from serve(tmp_path, db_url)


def serve(tmp_path: Path, db_url: str) -> Iterator[str]:
    """Run a ``jupyter server`` with the extension on ``db_url`` (token ``TOKEN``) while
    the generator is suspended; yields its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "DURABLE_DATABASE_URL": db_url,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
    }
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={tmp_path}",
            "--ServerApp.jpserver_extensions={'kernel_ext': True}",
            "--allow-root",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}api/status?token={TOKEN}", timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(
                        f"jupyter server did not start:\n{(tmp_path / 'server.log').read_text()}"
                    )
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(tmp_path / "server.log", ARTIFACTS / "browser-server.log")


def test_list_then_execution_page(server: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda err: errors.append(str(err)))

            page.goto(f"{server}durable/?token={TOKEN}")
            table = page.get_by_role("table", name="execution")
            expect(page.get_by_role("link", name="shipment-teapot")).to_be_visible()
            expect(page.get_by_role("link", name="shipment-kettle")).to_be_visible()
            expect(table.get_by_text("COMPLETED")).to_be_visible()
            expect(table.get_by_text("RUNNING")).to_have_count(2)  # kettle, and the swapped run
            page.screenshot(path=str(ARTIFACTS / "ui-executions.png"), full_page=True)

            # The filter box, by keyboard: the list query language.
            page.get_by_label("Filter").fill("ExecutionStatus = 'Running'")
            page.get_by_label("Filter").press("Enter")
            expect(page.get_by_role("link", name="shipment-teapot")).to_have_count(0)
            expect(page.get_by_role("link", name="shipment-kettle")).to_be_visible()
            assert "query=" in page.url  # the filtered list is a shareable link
            page.get_by_role("button", name="Clear").click()
            expect(page.get_by_role("link", name="shipment-teapot")).to_be_visible()

            page.get_by_role("link", name="shipment-teapot").click()
            expect(page.get_by_role("heading", name="Workflow shipment-teapot")).to_be_visible()
            assert "#/workflows/shipment-teapot?run_id=" in page.url
            history = page.locator("#history")
            expect(history.get_by_role("cell", name="pack", exact=True)).to_be_visible()
            # The compact rows and the timeline's lanes are the server's (widgets.models).
            # The activity's result, and the run's (the same text).
            expect(history.get_by_role("cell", name='"packed teapot"')).to_have_count(2)
            expect(history.get_by_role("cell", name="timer 1 (0.020s)")).to_be_visible()
            expect(history.locator("caption")).to_have_text(
                re.compile(r"^3 steps \(from \d+ events\)$")
            )
            timeline = page.locator("#timeline svg")
            expect(timeline.locator("rect.bar").first).to_be_visible()
            lanes = timeline.locator("g.lane .lane-label")
            expect(lanes).to_have_text(["workflow tasks", "timer 1 (0.020s)", "pack"])
            expect(timeline.locator("rect.attempt")).to_have_attribute("data-status", "completed")
            page.screenshot(path=str(ARTIFACTS / "ui-execution-compact.png"), full_page=True)

            page.get_by_role("button", name="Full").click()
            expect(history.get_by_text("WORKFLOW_EXECUTION_COMPLETED")).to_be_visible()
            expect(page.get_by_role("button", name="Full")).to_have_attribute(
                "aria-pressed", "true"
            )
            page.screenshot(path=str(ARTIFACTS / "ui-execution-full.png"), full_page=True)

            page.get_by_role("button", name="JSON").click()
            expect(history.locator("pre")).to_contain_text("EVENT_TYPE_TIMER_FIRED")

            # The shared link opens the same page directly.
            shared = page.url
            page.goto(shared)
            expect(page.get_by_role("heading", name="Workflow shipment-teapot")).to_be_visible()

            # Terminating the running one from its page (a POST: token and XSRF pass).
            page.goto(f"{server}durable/?token={TOKEN}#/workflows/shipment-kettle")
            expect(page.get_by_role("heading", name="Workflow shipment-kettle")).to_be_visible()
            page.once("dialog", lambda dialog: dialog.accept())
            page.get_by_role("button", name="Terminate").click()
            expect(page.locator("#summary").get_by_text("TERMINATED")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "ui-execution-terminated.png"), full_page=True)

            # The non-determinism error of the swapped run is visible on its page.
            page.goto(f"{server}durable/?token={TOKEN}#/workflows/swap-1")
            expect(page.get_by_role("heading", name="Workflow swap-1")).to_be_visible()
            expect(page.locator("#summary").get_by_text("(failing)")).to_be_visible()
            page.get_by_role("button", name="Compact").click()
            expect(page.locator("#history").get_by_text("history event 5").first).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "ui-nondeterminism.png"), full_page=True)

            # The pager, by keyboard, one run a page: the page's token is in the URL, the
            # earlier pages are remembered, and every run shows up exactly once.
            page.goto(f"{server}durable/?token={TOKEN}#/?limit=1")
            pager = page.get_by_role("navigation", name="Pages")
            caption = page.locator("#list-caption")
            first_button = pager.get_by_role("button", name="First page")
            prev_button = pager.get_by_role("button", name="Previous page")
            next_button = pager.get_by_role("button", name="Next page")
            rows = page.locator("#executions tbody a")
            expect(caption).to_contain_text("(page 1, more on the next page)")
            expect(pager).to_contain_text("Page 1")
            expect(first_button).to_be_disabled()
            expect(prev_button).to_be_disabled()
            seen = [rows.inner_text()]
            next_button.focus()
            for number in (2, 3):
                page.keyboard.press("Enter")
                expect(caption).to_contain_text(f"(page {number}")
                expect(pager).to_contain_text(f"Page {number}")
                seen.append(rows.inner_text())
                assert "after=" in page.url and "page=" not in page.url
            assert seen == ["swap-1", "shipment-kettle", "shipment-teapot"]
            expect(caption).to_contain_text("the last page")
            expect(next_button).to_be_disabled()
            expect(prev_button).to_be_focused()  # the keyboard stays in the pager
            shared = page.url
            page.keyboard.press("Enter")
            expect(caption).to_contain_text("(page 2, more on the next page)")
            expect(rows).to_have_text("shipment-kettle")
            page.go_back()  # the browser's history walks the same pages
            expect(caption).to_contain_text("(page 3, the last page)")
            page.go_back()
            expect(caption).to_contain_text("(page 2, more on the next page)")
            page.screenshot(path=str(ARTIFACTS / "ui-executions-page-2.png"), full_page=True)

            # A shared link to a later page: its page number and earlier pages are unknown,
            # and First page starts over.
            other = browser.new_page(viewport={"width": 1280, "height": 900})
            other.on("pageerror", lambda err: errors.append(str(err)))
            other.goto(shared)
            other_pager = other.get_by_role("navigation", name="Pages")
            expect(other.locator("#executions tbody a")).to_have_text("shipment-teapot")
            expect(other.locator("#list-caption")).to_contain_text("(a later page, the last")
            expect(other_pager).to_contain_text("A later page")
            expect(other_pager.get_by_role("button", name="Previous page")).to_be_disabled()
            expect(other_pager.get_by_role("button", name="Next page")).to_be_disabled()
            other_pager.get_by_role("button", name="First page").click()
            expect(other.locator("#list-caption")).to_contain_text("(page 1, more")
            expect(other.locator("#executions tbody a")).to_have_text("swap-1")
            expect(other_pager.get_by_role("button", name="First page")).to_be_disabled()
            assert errors == []
        finally:
            browser.close()


def _open(pw: Any) -> tuple[Any, Any, list[str]]:
    browser = launch(pw)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    return browser, page, errors


def test_header_names_the_database_and_how_to_share_it(server: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser, page, errors = _open(pw)
        try:
            page.goto(f"{server}durable/?token={TOKEN}")
            header = page.get_by_role("banner")
            database = header.get_by_role("group", name="Database")
            expect(database.locator("#db-url")).to_have_text(f"sqlite:///{tmp_path / 'durable.db'}")
            help_body = database.locator(".db-help-body")
            expect(help_body).to_be_hidden()

            # The hint, by keyboard: how a notebook's kernel and this server share a store.
            summary = database.get_by_text("Not seeing your runs?")
            summary.focus()
            page.keyboard.press("Enter")
            expect(help_body).to_be_visible()
            expect(help_body).to_contain_text("leave DURABLE_DATABASE_URL unset in the kernel")
            expect(help_body).to_contain_text("start jupyter lab with DURABLE_DATABASE_URL set")
            # The fixture's server was started with DURABLE_DATABASE_URL in its environment.
            expect(help_body).to_contain_text("read this URL from DURABLE_DATABASE_URL")
            page.screenshot(path=str(ARTIFACTS / "ui-database-help.png"))
            page.keyboard.press("Escape")
            expect(help_body).to_be_hidden()
            expect(summary).to_be_focused()
            page.screenshot(path=str(ARTIFACTS / "ui-database-header.png"))
            assert errors == []
        finally:
            browser.close()


def test_a_missing_run_shows_only_the_error(server: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser, page, errors = _open(pw)
        try:
            page.goto(f"{server}durable/?token={TOKEN}#/workflows/shipment-teapot")
            summary = page.locator("#summary")
            expect(summary).to_contain_text("Shipment")
            expect(page.locator("#history")).to_contain_text("packed teapot")
            teapot_run = page.locator("#summary .mono").inner_text()
            error = page.get_by_role("alert")

            def only_the_error(wid: str, word: str) -> None:
                expect(error).to_be_visible()
                expect(error).to_contain_text(word)
                expect(page.get_by_role("heading", level=1)).to_have_text(f"Workflow {wid}")
                for part in ("#summary", "#pending", "#timeline", "#history", "#cancel-run"):
                    expect(page.locator(part)).to_be_hidden()
                expect(page.locator("#main")).not_to_contain_text("packed teapot")
                expect(page.locator("#main")).not_to_contain_text(teapot_run)
                assert page.locator("#summary > *, #history > *").count() == 0

            # Another workflow id, then a run id of this one that does not exist.
            page.evaluate("location.hash = '#/workflows/no-such-run'")
            only_the_error("no-such-run", "no-such-run")
            page.screenshot(path=str(ARTIFACTS / "ui-missing-run.png"), full_page=True)
            page.wait_for_timeout(2500)  # a live refresh later: still only the error
            only_the_error("no-such-run", "no-such-run")

            page.go_back()
            expect(summary).to_contain_text(teapot_run)
            expect(error).to_be_hidden()
            bogus = "0190f3e1-0000-7000-8000-000000000000"
            page.evaluate(f"location.hash = '#/workflows/shipment-teapot?run_id={bogus}'")
            only_the_error("shipment-teapot", bogus)

            # An id that is markup shows as text, in the heading and in the error.
            page.goto(f"{server}durable/?token={TOKEN}#/workflows/shipment-teapot")
            expect(summary).to_contain_text(teapot_run)
            page.evaluate(
                "id => { location.hash = '#/workflows/' + encodeURIComponent(id); }", XSS_ID
            )
            only_the_error(XSS_ID, XSS_ID)
            _no_markup_parsed(page)

            # And back to a run that exists: its page again, without the error.
            page.get_by_role("link", name="All executions").click()
            page.get_by_role("link", name="shipment-kettle").click()
            expect(summary).to_contain_text("nobody-polls")
            expect(error).to_be_hidden()
            assert errors == []
        finally:
            browser.close()


def test_a_bad_filter_clears_the_stale_results(server: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser, page, errors = _open(pw)
        try:
            # Page 2 of a one-run-a-page list, so there is paging state to reset.
            page.goto(f"{server}durable/?token={TOKEN}#/?limit=1")
            caption = page.locator("#list-caption")
            pager = page.get_by_role("navigation", name="Pages")
            links = page.locator("#executions tbody a")
            expect(caption).to_contain_text("(page 1, more on the next page)")
            pager.get_by_role("button", name="Next page").click()
            expect(caption).to_contain_text("(page 2, more on the next page)")
            expect(links).to_have_text("shipment-kettle")

            query = page.get_by_label("Filter")
            error = page.get_by_role("alert")
            query.fill("WorkflowType = ")
            query.press("Enter")
            expect(error).to_contain_text("the filter ends too soon: expected a value after '='")
            expect(links).to_have_count(0)
            expect(page.locator("#executions tbody")).to_contain_text("correct the filter")
            expect(caption).to_have_text("No executions: the filter could not be read")
            expect(query).to_have_attribute("aria-invalid", "true")
            expect(query).to_have_value("WorkflowType =")
            for name in ("First page", "Previous page", "Next page"):
                expect(pager.get_by_role("button", name=name)).to_be_disabled()
            expect(page.locator("#page-label")).to_have_text("")
            page.screenshot(path=str(ARTIFACTS / "ui-bad-filter.png"), full_page=True)
            page.wait_for_timeout(2500)  # a live refresh later: still nothing stale
            expect(links).to_have_count(0)
            expect(error).to_be_visible()

            # The value echoed in the message is text, not markup.
            query.fill(f"ExecutionStatus = '{XSS_FILTER}'")
            query.press("Enter")
            expect(error).to_contain_text(XSS_FILTER)
            expect(links).to_have_count(0)
            _no_markup_parsed(page)

            # A good filter after a bad one: its rows, and no error.
            query.fill("WorkflowId = 'shipment-teapot'")
            query.press("Enter")
            expect(links).to_have_text("shipment-teapot")
            expect(error).to_be_hidden()
            expect(query).not_to_have_attribute("aria-invalid", "true")
            expect(caption).to_contain_text("1 execution matching")
            page.get_by_role("button", name="Clear").click()
            expect(caption).to_contain_text("(page 1, more on the next page)")
            expect(pager).to_contain_text("Page 1")
            assert errors == []
        finally:
            browser.close()


async def _refused(url: str) -> None:
    async with await Client.connect(url) as client:
        worker = Worker(client, task_queue="refuse", workflows=[Refusal], activities=[refuse])
        async with worker:
            with pytest.raises(WorkflowFailureError):
                await client.execute_workflow(
                    Refusal.run, XSS_INPUT, id=XSS_ID, task_queue="refuse"
                )


def test_ids_payloads_and_failures_are_shown_as_text(server: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    asyncio.run(_refused(f"sqlite:///{tmp_path / 'durable.db'}"))
    with sync_playwright() as pw:
        browser, page, errors = _open(pw)
        try:
            page.goto(f"{server}durable/?token={TOKEN}")
            page.get_by_role("link", name=XSS_ID).click()
            expect(page.get_by_role("heading", level=1)).to_have_text(f"Workflow {XSS_ID}")
            expect(page.locator("#summary")).to_contain_text("FAILED")
            history = page.locator("#history")
            expect(history).to_contain_text(f"{XSS_FAILURE} refused {XSS_INPUT}")
            expect(history.get_by_role("cell", name="refuse", exact=True)).to_be_visible()
            svg_titles = page.locator("#timeline title").all_text_contents()
            assert any(XSS_FAILURE in t for t in svg_titles), svg_titles
            page.screenshot(path=str(ARTIFACTS / "ui-markup-as-text.png"), full_page=True)
            for view in ("Full", "JSON"):
                page.get_by_role("button", name=view).click()
                expect(history).to_contain_text(XSS_FAILURE)
                if view == "Full":
                    expect(history).to_contain_text(f'input: "{XSS_INPUT}"')
            _no_markup_parsed(page)
            assert errors == []
        finally:
            browser.close()


XSS_SUMMARY = "<b>x</b><img src=x onerror=window.__xss=5>"


@workflow.defn
class Wrapped:
    """A timer and an activity with summaries (one of them markup)."""

    @workflow.run
    async def run(self, item: str) -> str:
        await workflow.sleep(timedelta(milliseconds=20), summary="let the glue dry")
        return await workflow.execute_activity(
            pack, args=[item], start_to_close_timeout=timedelta(seconds=10), summary=XSS_SUMMARY
        )


async def _summarised(url: str) -> None:
    client = await Client.connect(url)
    async with client, Worker(client, task_queue="wrap", workflows=[Wrapped], activities=[pack]):
        await client.execute_workflow(
            Wrapped.run,
            "vase",
            id="wrapped-vase",
            task_queue="wrap",
            static_summary="Wraps a **vase** <i>gently</i>",
            static_details="Glue first.\nThen the paper.",
        )


def test_summaries_are_shown_as_text(server: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    asyncio.run(_summarised(f"sqlite:///{tmp_path / 'durable.db'}"))
    shots = Path("/tmp/shots")
    shots.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser, page, errors = _open(pw)
        try:
            page.goto(f"{server}durable/?token={TOKEN}#/workflows/wrapped-vase")
            expect(page.get_by_role("heading", level=1)).to_have_text("Workflow wrapped-vase")
            summary = page.locator("#summary")
            expect(summary.locator(".static-summary")).to_have_text(
                "Wraps a **vase** <i>gently</i>"
            )
            expect(summary.locator(".static-details")).to_have_text("Glue first.\nThen the paper.")
            history = page.locator("#history")
            expect(history.locator(".user-summary").filter(has_text=XSS_SUMMARY)).to_be_visible()
            expect(history.locator(".user-summary").filter(has_text="let the glue")).to_be_visible()
            notes = page.locator("#timeline text.lane-summary")
            expect(notes).to_have_count(2)
            # Each note is cut to the room beside its bars, and that room depends on how
            # long the 20 ms timer took against the whole run (machine speed) and on the
            # page's width (a scrollbar coming or going): each is a prefix, shown as text,
            # and the whole summary is in the note's hover title.
            texts = sorted(notes.all_text_contents(), key=lambda t: t.startswith("<"))
            assert len(texts) == 2, texts
            glue, xss = texts
            assert len(glue) >= 2 and "let the glue dry".startswith(glue.removesuffix("…")), texts
            assert len(xss) >= 2 and XSS_SUMMARY.startswith(xss.removesuffix("…")), texts
            titles = page.locator("#timeline g.lane > g > title").all_text_contents()
            assert any(t.endswith("— let the glue dry") for t in titles), titles
            assert any(t.endswith(f"— {XSS_SUMMARY}") for t in titles), titles
            page.screenshot(path=str(ARTIFACTS / "ui-summaries.png"), full_page=True)
            page.screenshot(path=str(shots / "web-ui-run-summaries.png"), full_page=True)
            page.get_by_role("button", name="Full").click()
            scheduled = history.get_by_role("row").filter(has_text="ACTIVITY_TASK_SCHEDULED")
            expect(scheduled.locator(".user-summary")).to_have_text(XSS_SUMMARY)
            started = history.get_by_role("row").filter(has_text="WORKFLOW_EXECUTION_STARTED")
            expect(started.locator(".user-summary")).to_have_text("Wraps a **vase** <i>gently</i>")
            _no_markup_parsed(page)
            assert page.locator("main b, main i").count() == 0
            assert errors == []
        finally:
            browser.close()


async def _tricky_ids(url: str) -> None:
    async with await Client.connect(url) as client:
        for wid in ("..", "a/b", "a", "%2F"):
            await client.start_workflow(
                "Shipment", args=[f"for {wid}"], id=wid, task_queue="nobody-polls"
            )


def test_ids_with_slashes_and_dots_open_their_own_page(server: str, tmp_path: Path) -> None:
    """A run named "..", "a/b" or "%2F" opens its own page: the id is one URL segment (a
    ".." sent as is would be resolved away by the browser, to the API's root)."""
    from playwright.sync_api import expect, sync_playwright

    asyncio.run(_tricky_ids(f"sqlite:///{tmp_path / 'durable.db'}"))
    with sync_playwright() as pw:
        browser, page, errors = _open(pw)
        try:
            for wid in ("..", "a/b", "%2F", "a"):
                page.goto(f"{server}durable/?token={TOKEN}")
                page.get_by_role("link", name=wid, exact=True).click()
                expect(page.get_by_role("heading", level=1)).to_have_text(f"Workflow {wid}")
                expect(page.locator("#history")).to_contain_text(f"for {wid}")
            page.screenshot(path=str(ARTIFACTS / "ui-tricky-id.png"), full_page=True)
            assert errors == []
        finally:
            browser.close()
