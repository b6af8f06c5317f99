"""Finding runs in Chromium: the web UI's run list and the ExecutionList widget's front end
with Temporal's List Filter, attribute names suggested as you type, status chips with
exact counts, and search attributes as chips, all drawn as text: a workflow id and a
search attribute value made of markup never run a script. Screenshots go to
``test-artifacts/`` and ``/tmp/shots/``."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import Client, workflow
from engine.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from engine.operator import AddSearchAttributesRequest
from widgets import ExecutionList
from widgets._static import CSS, esm

from .chromium import ARTIFACTS, launch, require_chromium
from .test_web_ui import TOKEN, serve
from .test_widget_summaries import MOUNT, _state

XSS_ID = "<img src=x onerror=window.__xss=1>"
XSS_VALUE = "<img src=x onerror=window.__xss=2>"
CUSTOMER = SearchAttributeKey.for_keyword("CustomerId")
AMOUNT = SearchAttributeKey.for_int("Amount")
SHOTS = Path("/tmp/shots")


@workflow.defn
class Waits:
    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


async def _populate(url: str) -> None:
    async with await Client.connect(url) as client:
        await client.operator_service.add_search_attributes(
            # Inventory: "IN" of "WorkflowId IN (...)" starts its name.
            AddSearchAttributesRequest(
                {"CustomerId": "Keyword", "Amount": "Int", "Inventory": "Keyword"}
            )
        )
        for wid, pairs in (
            (XSS_ID, [SearchAttributePair(CUSTOMER, XSS_VALUE), SearchAttributePair(AMOUNT, 7)]),
            ("order-abc", [SearchAttributePair(CUSTOMER, "abc"), SearchAttributePair(AMOUNT, 5)]),
            ("order-done", [SearchAttributePair(CUSTOMER, "abc")]),
        ):
            await client.start_workflow(
                Waits.run,
                id=wid,
                task_queue="nobody-polls",
                search_attributes=TypedSearchAttributes(pairs),
            )
        await client.get_workflow_handle("order-done").terminate("done")


@pytest.fixture
def store(tmp_path: Path) -> str:
    require_chromium()
    url = f"sqlite:///{tmp_path / 'durable.db'}"
    asyncio.run(_populate(url))
    return url


@pytest.fixture
def server(tmp_path: Path, store: str) -> Iterator[str]:
    yield from serve(tmp_path, store)


def _no_script_ran(page: Any, scope: str) -> None:
    assert page.evaluate("window.__xss") is None, "data was inserted as HTML"
    assert page.locator(f"{scope} img").count() == 0


def _shoot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def test_web_ui_filters_suggests_counts_and_shows_attributes_as_text(server: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            errors: list[str] = []
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.goto(f"{server}durable/?token={TOKEN}")

            # The markup id and value are shown as text, in the row and its chips.
            table = page.locator("#executions")
            expect(table.get_by_role("link", name=XSS_ID)).to_be_visible()
            expect(table.locator(".sa-chip", has_text=f"CustomerId={XSS_VALUE}")).to_be_visible()
            expect(table.locator(".sa-chip", has_text="Amount=5")).to_be_visible()
            # Exact counts by status, from workflows/count.
            chips = page.locator("#status-chips .status-chip")
            expect(chips).to_have_text(["All 3", "running 2", "terminated 1"])
            _no_script_ran(page, "main")

            # Suggestions for the word under the cursor, taken by keyboard.
            box = page.get_by_role("combobox")
            box.click()
            box.press_sequentially("Cust")
            options = page.locator("#filter [role=option]")
            expect(options).to_have_count(1)
            expect(options.first).to_contain_text("CustomerId")
            expect(options.first).to_contain_text("Keyword · custom")
            expect(box).to_have_attribute("aria-expanded", "true")
            _shoot(page, "ui-filter-suggestions.png")
            expect(options.first).to_have_attribute("aria-selected", "false")
            box.press("ArrowDown")  # into the list: Enter takes it, does not submit
            expect(options.first).to_have_attribute("aria-selected", "true")
            box.press("Enter")
            expect(box).to_have_value("CustomerId")
            expect(box).to_have_attribute("aria-expanded", "false")
            box.press_sequentially(" = 'abc' AND Am")
            expect(options).to_have_text([re.compile("^Amount")])
            box.press("Tab")
            box.press_sequentially(" > 1")
            expect(box).to_have_value("CustomerId = 'abc' AND Amount > 1")
            box.press("Enter")
            expect(table.get_by_role("link", name="order-abc")).to_be_visible()
            expect(table.get_by_role("link")).to_have_count(1)
            expect(chips).to_have_text(["All 1", "running 1"])

            # Enter after a word that only starts a name applies the filter as typed.
            box.fill("")
            box.press_sequentially("WorkflowId IN")
            expect(options).to_have_text([re.compile("^Inventory")])
            box.press("Enter")
            expect(box).to_have_value("WorkflowId IN")
            expect(box).to_have_attribute("aria-expanded", "false")
            expect(page).to_have_url(re.compile(r"query=WorkflowId(\+|%20)IN$"))
            expect(box).to_have_attribute("aria-invalid", "true")  # applied: it ends too soon
            box.press_sequentially(" ('order-abc')")
            box.press("Enter")
            expect(table.get_by_role("link")).to_have_text(["order-abc"])
            expect(box).not_to_have_attribute("aria-invalid", "true")

            # A chip narrows the full filter to its status; the counts stay the filter's.
            box.fill("CustomerId = 'abc' OR Amount = 7")
            box.press("Enter")
            expect(chips).to_have_text(["All 3", "running 2", "terminated 1"])
            chips.filter(has_text="terminated").click()
            expect(table.get_by_role("link")).to_have_text(["order-done"])
            expect(chips.filter(has_text="terminated")).to_have_attribute("aria-current", "true")
            expect(chips).to_have_text(["All 3", "running 2", "terminated 1"])
            assert "status=Terminated" in page.url
            _shoot(page, "ui-status-chip.png")
            chips.filter(has_text="All").click()
            expect(table.get_by_role("link")).to_have_count(3)

            # A bad filter: the engine's message with its column, no rows.
            box.fill("CustomerId = ")
            box.press("Enter")
            error = page.locator("#error")
            expect(error).to_contain_text("column 13 of the list filter: the filter ends too soon")
            expect(box).to_have_attribute("aria-invalid", "true")
            _shoot(page, "ui-filter-error.png")
            _no_script_ran(page, "main")
            assert errors == []
        finally:
            browser.close()


def test_web_ui_draws_rows_without_waiting_for_the_count_and_counts_every_5_s(
    server: str,
) -> None:
    """The rows are drawn while the count by status is on its way; the live refresh
    (every 2 s) lists at every tick but counts at most every 5 s; a new filter or status
    chip counts at once."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            errors: list[str] = []
            page.on("pageerror", lambda err: errors.append(str(err)))
            held: list[Any] = []
            counting = re.compile(r"/api/v1/workflows/count\?")
            page.route(counting, lambda route: held.append(route))  # answered below
            page.goto(f"{server}durable/?token={TOKEN}")
            table = page.locator("#executions")
            chips = page.locator("#status-chips .status-chip")
            expect(table.get_by_role("link")).to_have_count(3)  # with the count held
            expect(chips).to_have_text(["All"])  # not counted yet
            assert len(held) == 1
            held.pop().continue_()
            page.unroute(counting)
            expect(chips).to_have_text(["All 3", "running 2", "terminated 1"])

            lists: list[str] = []
            counts: list[str] = []

            def seen(request: Any) -> None:
                if "/api/v1/workflows/count" in request.url:
                    counts.append(request.url)
                elif "/api/v1/workflows?" in request.url or request.url.endswith("/workflows"):
                    lists.append(request.url)

            page.on("request", seen)
            page.wait_for_timeout(8_000)  # ticks at about 2, 4, 6, 8 s
            assert len(lists) >= 3, lists
            assert 1 <= len(counts) <= 2, counts
            # A status chip counts at once (and lists its runs).
            counts.clear()
            chips.filter(has_text="terminated").click()
            expect(table.get_by_role("link")).to_have_text(["order-done"])
            expect(chips.filter(has_text="terminated")).to_have_attribute("aria-current", "true")
            expect(chips).to_have_text(["All 3", "running 2", "terminated 1"])
            assert 1 <= len(counts) <= 2, counts  # its own, and maybe the live one's
            _shoot(page, "ui-list-counted.png")
            assert errors == []
        finally:
            browser.close()


async def _widget_states(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The table state of an ExecutionList on the store: listing everything, and after
    a filter the engine refused."""
    async with await Client.connect(url) as client:
        view = ExecutionList(client)
        try:
            listing = _state(view.table)
            assert not view.set_query("CustomerId = ")
            refused = _state(view.table)
        finally:
            view.close()
    return listing, refused


# The widget mounted on a model that keeps what the view sends (window.__sent).
RECORDING_MOUNT = MOUNT.replace("send() {}", "send(m) { (window.__sent ||= []).push(m); }")
assert RECORDING_MOUNT != MOUNT


def _filters_sent(page: Any) -> list[str]:
    """The filters the widget's view sent to the kernel (Enter, or the Filter button)."""
    sent = page.evaluate("window.__sent || []")
    return [m["query"] for m in sent if m.get("type") == "query"]


def _text_x(box: Any, text: str) -> float:
    """Where in ``box`` (px from its left edge) the caret goes after ``text``."""
    x: float = box.evaluate(
        """(el, text) => {
          const cs = getComputedStyle(el);
          const ctx = document.createElement("canvas").getContext("2d");
          ctx.font = cs.font;
          return parseFloat(cs.borderLeftWidth) + parseFloat(cs.paddingLeft) +
            ctx.measureText(text).width;
        }""",
        text,
    )
    return x


def _mount(page: Any, state: dict[str, Any]) -> None:
    """The widget's module (as ExecutionTable ships it) rendered into a blank page."""
    page.set_content(
        f"<!doctype html><html><head><style>{CSS.read_text(encoding='utf-8')}</style></head>"
        '<body style="margin:12px"><div id="w" style="width:1060px"></div></body></html>'
    )
    page.evaluate(RECORDING_MOUNT, [esm("execution_list.js", "suggest.js"), state])


def test_execution_list_widget_draws_markup_as_text_and_suggests(store: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    listing, refused = asyncio.run(_widget_states(store))
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 420})
            errors: list[str] = []
            page.on("pageerror", lambda err: errors.append(str(err)))
            _mount(page, listing)
            widget = page.locator("#w")
            expect(widget.locator(".dn-xl-id", has_text=XSS_ID)).to_be_visible()
            expect(widget.locator(".dn-sa", has_text=f"CustomerId={XSS_VALUE}")).to_be_visible()
            expect(widget.locator(".dn-xl-chip")).to_have_text(
                ["all 3", "running 2", "terminated 1"]
            )
            box = widget.get_by_role("combobox")
            box.click()
            box.press_sequentially("Work")
            options = widget.locator("[role=option]")
            expect(options.first).to_contain_text("WorkflowId")
            expect(options).to_have_text([re.compile("^WorkflowId"), re.compile("^WorkflowType")])
            expect(options.first).to_have_attribute("aria-selected", "false")  # none yet
            box.press("ArrowDown")
            expect(options.first).to_have_attribute("aria-selected", "true")
            box.press("ArrowDown")
            expect(options.nth(1)).to_have_attribute("aria-selected", "true")
            _shoot(page, "widget-execution-list-suggestions.png")
            box.press("Escape")
            expect(options).to_have_count(0)

            # The caret moved back into another word (a click): the list is of that word,
            # and the name taken replaces it (not the word typed last).
            box.fill("")
            box.press_sequentially("Work = 'x' AND Cust")
            expect(options).to_have_text([re.compile("^CustomerId")])
            box.click(position={"x": _text_x(box, "Wo"), "y": 10})  # between "Wo" and "rk"
            expect(options).to_have_text([re.compile("^WorkflowId"), re.compile("^WorkflowType")])
            box.press("ArrowDown")
            box.press("Enter")
            expect(box).to_have_value("WorkflowId = 'x' AND Cust")
            assert _filters_sent(page) == []  # taking a name is no filter
            # The arrow keys move the caret off the word: the list closes, and Enter
            # filters (it does not put a name in place of the word left).
            box.press("End")
            box.press_sequentially(" AND Work")
            expect(options).to_have_text([re.compile("^WorkflowId"), re.compile("^WorkflowType")])
            for _ in range(5):  # to the end of "AND"
                box.press("ArrowLeft")
            expect(options).to_have_count(0)
            box.press("Enter")
            expect(box).to_have_value("WorkflowId = 'x' AND Cust AND Work")
            assert _filters_sent(page) == ["WorkflowId = 'x' AND Cust AND Work"]
            page.evaluate("window.__sent = []")

            # Enter after a word that only starts a name ("IN", Inventory) filters.
            box.fill("")
            box.press_sequentially("WorkflowId IN")
            expect(options).to_have_text([re.compile("^Inventory")])
            box.press("Enter")
            expect(box).to_have_value("WorkflowId IN")
            expect(options).to_have_count(0)
            assert _filters_sent(page) == ["WorkflowId IN"]
            _no_script_ran(page, "#w")

            _mount(page, refused)
            expect(widget.locator(".dn-error")).to_contain_text(
                "column 13 of the list filter: the filter ends too soon"
            )
            _shoot(page, "widget-execution-list-error.png")
            _no_script_ran(page, "#w")
            assert errors == []
        finally:
            browser.close()
