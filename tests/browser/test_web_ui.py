"""The web UI in a real browser: Debian's Chromium driven by Playwright, against a real
``jupyter server`` subprocess with a token. Screenshots go to ``test-artifacts/``.

Needs ``/usr/bin/chromium`` (``apt-get install -y chromium``); never ``playwright install``.
"""

from __future__ import annotations

import asyncio
import os
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

from engine import Client, Worker, activity, workflow

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
            expect(history.get_by_text('result: "packed teapot"').first).to_be_visible()
            expect(history.get_by_role("cell", name="timer 1")).to_be_visible()
            expect(page.locator("#timeline svg rect").first).to_be_visible()
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
