"""JupyterLab in a real browser: a notebook runs workflows and renders every widget live.

Debian's Chromium, driven by Playwright, against a ``jupyter lab`` subprocess with a token,
the server extension and a kernel with the kernel extension. The notebook prints a
workflow's result, renders each widget, and watches a failing-then-succeeding activity gain
its attempts in a Timeline as they happen; then the web UI at ``/durable/`` shows the same
runs. Screenshots go to ``test-artifacts/jupyterlab-*.png`` (``jupyterlab-failure.png``
and ``jupyterlab-server.log`` when it fails, with the page's console errors printed).

Needs ``/usr/bin/chromium`` (``apt-get install -y chromium``); never ``playwright install``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .chromium import ARTIFACTS, launch, require_chromium
from .jupyterlab_server import (
    KernelTraffic,
    dump_kernel_stacks,
    kernels_of,
    log_tail,
    new_lab_page,
    shut_down,
    start_jupyterlab,
    wait_until_up,
)

TOKEN = "jupyterlab-browser-test-token"
NOTEBOOK = "durable-lab.ipynb"
TIMEOUT_MS = 30_000  # the longest wait for any one thing to appear in the page


def _cells(root: Path) -> list[str]:
    """The notebook's code cells; the test refers to them by index (see CELL_*)."""
    return [
        # 0: the extension (the server exports the store's URL to the kernel).
        f"""\
        import os
        from pathlib import Path

        GATES = Path({str(root)!r})
        (GATES / "kernel.pid").write_text(str(os.getpid()))
        %load_ext kernel_ext
        import kernel_ext

        print("store:", kernel_ext.session().database_url)""",
        # 1: a workflow and activities defined in the cell (picked up by the extension).
        """\
        import asyncio
        from datetime import timedelta

        from engine import ApplicationError, Client, RetryPolicy, activity, workflow


        @activity.defn
        async def greet(name: str) -> str:
            return f"Hello, {name}!"


        @workflow.defn
        class Hello:
            @workflow.run
            async def run(self, name: str) -> str:
                return await workflow.execute_activity(
                    greet, name, start_to_close_timeout=timedelta(seconds=30)
                )


        @activity.defn
        async def flaky_step(name: str) -> str:
            # Attempt n waits until the test creates the file go-n: the page is looked at
            # between attempts. Attempts 1 and 2 fail, attempt 3 succeeds.
            attempt = activity.info().attempt
            while not (GATES / f"go-{attempt}").exists():
                await asyncio.sleep(0.05)
            if attempt < 3:
                raise ApplicationError(f"attempt {attempt} failed", type="Flaky")
            return f"{name} done on attempt {attempt}"


        @workflow.defn
        class Flaky:
            @workflow.run
            async def run(self, name: str) -> str:
                return await workflow.execute_activity(
                    flaky_step,
                    name,
                    start_to_close_timeout=timedelta(seconds=60),
                    retry_policy=RetryPolicy(
                        initial_interval=timedelta(milliseconds=300),
                        backoff_coefficient=1.0,
                        maximum_attempts=5,
                    ),
                )""",
        # 2
        "%durable worker start",
        # 3: top-level await; the result printed.
        """\
        client = await Client.connect()
        result = await client.execute_workflow(
            Hello.run, "JupyterLab", id="hello-lab", task_queue="notebook"
        )
        print("result:", result)""",
        # 4
        """\
        from widgets import HistoryView, Timeline

        handle = client.get_workflow_handle("hello-lab")
        HistoryView(handle)""",
        # 5
        "Timeline(handle)",
        # 6: a handle displayed as the last expression shows the HistoryView.
        "handle",
        # 7: the live case: a Timeline of a run whose activity fails twice, then succeeds.
        """\
        live = await client.start_workflow(Flaky.run, "flaky", id="flaky-lab", task_queue="notebook")
        Timeline(live)""",
        # 8
        """\
        from widgets import ExecutionList

        ExecutionList(client)""",
        # 9: the kernel's worker (the session has no public accessor for it).
        """\
        from widgets import WorkerMonitor

        WorkerMonitor(kernel_ext.session().worker("notebook"))""",
        # 10
        """\
        from widgets import ReplayStepper

        ReplayStepper(await handle.fetch_history(), workflows=[Hello])""",
        # 11: blocks the kernel until the test has let attempt 3 through.
        'print("flaky:", await live.result())',
        # 12: a long history: only the rows in view reach the page.
        """\
        from engine import HistoryEvent, WorkflowHistory

        big = [HistoryEvent(1, 0.0, "WorkflowExecutionStarted", {"workflowType": {"name": "Big"}})]
        big += [
            HistoryEvent(i, float(i), "MarkerRecorded", {"markerName": f"m{i}"})
            for i in range(2, 20_001)
        ]
        HistoryView(WorkflowHistory("big", big), mode="full")""",
    ]


CELL_STORE, CELL_RESULT, CELL_HISTORY, CELL_TIMELINE, CELL_HANDLE, CELL_LIVE = 0, 3, 4, 5, 6, 7
CELL_LIST, CELL_MONITOR, CELL_STEPPER, CELL_FLAKY_RESULT, CELL_BIG = 8, 9, 10, 11, 12


def _write_notebook(path: Path) -> None:
    cells: list[dict[str, Any]] = [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": f"cell-{i}",
            "metadata": {},
            "outputs": [],
            "source": textwrap.dedent(source),
        }
        for i, source in enumerate(_cells(path.parent))
    ]
    notebook = {
        "cells": cells,
        "metadata": {
            # A known kernelspec: JupyterLab opens the notebook without asking for a kernel.
            "kernelspec": {
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
                "name": "python3",
            },
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook, indent=1))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Lab:
    """A running ``jupyter lab``: its base URL and root directory."""

    base: str
    root: Path
    log: Path

    def url(self, path: str) -> str:
        """``path`` under the server, with the token."""
        return f"{self.base}{path}{'&' if '?' in path else '?'}token={TOKEN}"


def _stop(proc: subprocess.Popen[bytes], lab: Lab) -> None:
    """Shut the server down (it shuts its kernels down), then make sure nothing is left."""
    shut_down(proc, lab.url("api/shutdown"))
    # Kernels run in their own process group: the one the notebook started wrote its pid.
    pid_file = lab.root / "kernel.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """``jupyter lab`` on loopback with a token; its store is the extension's default."""
    require_chromium()
    root = tmp_path / "root"
    root.mkdir()
    log_path = tmp_path / "lab.log"
    log = log_path.open("w")
    proc, base = start_jupyterlab(tmp_path, root, TOKEN, log)
    lab = Lab(base=base, root=root, log=log_path)
    try:
        if not wait_until_up(proc, lab.url("api/status")):
            log.flush()
            pytest.fail(f"jupyter lab did not start:\n{log_path.read_text()}")
        yield lab
    finally:
        _stop(proc, lab)
        log.close()
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(log_path, ARTIFACTS / "jupyterlab-server.log")


def _run_all_cells(page: Any) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


def test_notebook_widgets_and_web_ui_in_jupyterlab(lab: Lab) -> None:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "jupyterlab-failure.png").unlink(missing_ok=True)
    _write_notebook(lab.root / NOTEBOOK)
    problems: list[str] = []  # the pages' JS errors, printed when anything fails

    def shot(page: Any, name: str) -> None:
        page.screenshot(path=str(ARTIFACTS / f"jupyterlab-{name}.png"))

    with sync_playwright() as pw:
        browser = launch(pw)
        page = new_lab_page(browser, problems, TIMEOUT_MS)
        traffic = KernelTraffic(page)
        try:
            page.goto(lab.url(f"lab/tree/{NOTEBOOK}"))
            # The widget front ends ship as prebuilt lab extensions of the pip packages.
            config = json.loads(page.locator("#jupyter-config-data").text_content() or "{}")
            extensions = {e["name"] for e in config.get("federated_extensions", [])}
            missing = {"anywidget", "@jupyter-widgets/jupyterlab-manager"} - extensions
            assert not missing, f"JupyterLab lacks {missing} (has {sorted(extensions)})"
            notebook = page.locator(".jp-NotebookPanel")
            cells = notebook.locator(".jp-Notebook .jp-Cell")
            expect(cells).to_have_count(len(_cells(lab.root)))
            # The status bar says Idle only once the kernel is connected and idle (the
            # toolbar's indicator says idle before there is a kernel at all, and cells run
            # then are dropped).
            kernel_idle = page.locator("#jp-main-statusbar").get_by_text(
                re.compile(r"Python 3 \(ipykernel\) \| Idle$")
            )
            expect(kernel_idle).to_be_visible()

            def output(index: int) -> Any:
                return cells.nth(index).locator(".jp-OutputArea")

            def rendered(index: int, css: str) -> Any:
                """The widget view ``css`` in cell ``index``'s output; fails at once when
                the widget manager shows an error instead, or a script error happens."""
                view = output(index).locator(css)
                broken = output(index).get_by_text("Error displaying widget")
                crashed = page.locator("html[data-page-error]")
                expect(view.first.or_(broken.first).or_(crashed).first).to_be_attached()
                if crashed.count():
                    message = crashed.get_attribute("data-page-error")
                    raise AssertionError(
                        f"a script error in the page while waiting for cell {index}'s widget "
                        f"(any widget's, see the console errors below): {message}"
                    )
                if broken.count():
                    raise AssertionError(f"cell {index}: {broken.first.inner_text()}")
                expect(view.first).to_be_visible()
                return view

            _run_all_cells(page)

            # 1. The store is the server extension's default under root_dir, and the
            # workflow's result is printed by its cell.
            expect(output(CELL_STORE)).to_contain_text(".durable/durable.db")
            assert (lab.root / ".durable" / "durable.db").exists()
            expect(output(CELL_RESULT)).to_contain_text("result: Hello, JupyterLab!")

            # 2. HistoryView and Timeline of the finished run.
            history = rendered(CELL_HISTORY, ".dn-widget.dn-history")
            expect(history.locator(".dn-row", has_text="greet")).to_be_visible()
            expect(history.locator(".dn-run-status")).to_have_attribute("data-status", "completed")
            history.screenshot(path=str(ARTIFACTS / "jupyterlab-history-view.png"))
            timeline = rendered(CELL_TIMELINE, ".dn-widget.dn-timeline")
            expect(timeline.locator("svg")).to_be_visible()
            expect(timeline.locator(".dn-bar").first).to_be_visible()
            expect(timeline.locator('rect.dn-attempt[data-status="completed"]')).to_have_count(1)
            timeline.screenshot(path=str(ARTIFACTS / "jupyterlab-timeline.png"))

            # 4. A handle as the last expression of a cell shows its HistoryView.
            shown = rendered(CELL_HANDLE, ".dn-widget.dn-history")
            expect(shown.locator(".dn-row", has_text="greet")).to_be_visible()

            # 3. The live case: each attempt appears in the Timeline as it happens.
            live = rendered(CELL_LIVE, ".dn-widget.dn-timeline")
            attempts = live.locator("rect.dn-attempt")
            failed = live.locator('rect.dn-attempt[data-status="failed"]')
            running = live.locator('rect.dn-attempt[data-status="running"]')
            expect(running).to_have_count(1)  # attempt 1, waiting for go-1
            expect(failed).to_have_count(0)
            for attempt in (1, 2):
                (lab.root / f"go-{attempt}").touch()
                expect(failed).to_have_count(attempt)
                expect(running).to_have_count(1)  # the next attempt started, not finished
                expect(attempts).to_have_count(attempt + 1)
                expect(live.locator(".dn-backoff")).to_have_count(attempt)
                expect(live.locator(".dn-live")).to_contain_text("live")
                live.scroll_into_view_if_needed()
                shot(page, f"timeline-attempt-{attempt}")
            (lab.root / "go-3").touch()
            expect(live.locator('rect.dn-attempt[data-status="completed"]')).to_have_count(1)
            expect(failed).to_have_count(2)
            expect(running).to_have_count(0)
            expect(output(CELL_FLAKY_RESULT)).to_contain_text("flaky: flaky done on attempt 3")
            # The run has closed: its view stops and publishes its final static copy, and
            # JupyterLab may re-render the output meanwhile, replacing the element. Scroll
            # in one step in the page (no waiting for a stable element that may be gone).
            live.first.evaluate("element => element.scrollIntoView({block: 'center'})")
            shot(page, "timeline-attempt-3")
            expect(kernel_idle).to_be_visible()

            # ExecutionList, WorkerMonitor and ReplayStepper.
            executions = rendered(CELL_LIST, ".dn-execution-list")
            table = executions.locator(".dn-xl")
            expect(table.locator(".dn-xl-row", has_text="hello-lab")).to_be_visible()
            expect(table.locator(".dn-xl-row", has_text="flaky-lab")).to_contain_text("completed")
            table.locator(".dn-xl-row", has_text="hello-lab").click()  # opens its history below
            expect(executions.locator(".dn-history .dn-row", has_text="greet")).to_be_visible()
            executions.screenshot(path=str(ARTIFACTS / "jupyterlab-execution-list.png"))

            monitor = rendered(CELL_MONITOR, ".dn-widget.dn-wm")
            expect(monitor.locator(".dn-title")).to_contain_text("notebook")
            expect(monitor.locator(".dn-wm-row").first).to_be_visible()
            monitor.screenshot(path=str(ARTIFACTS / "jupyterlab-worker-monitor.png"))

            stepper = rendered(CELL_STEPPER, ".dn-widget.dn-stepper")
            expect(stepper).to_contain_text("Replay of hello-lab")
            expect(stepper.locator(".dn-counts")).to_contain_text("event 0 of")
            stepper.get_by_role("button", name="run to end").click()
            expect(stepper.locator(".dn-st-state")).to_have_text("completed")
            stepper.screenshot(path=str(ARTIFACTS / "jupyterlab-replay-stepper.png"))

            # A 20,000-event history: scrolling brings the rows in view, and no more.
            big = rendered(CELL_BIG, ".dn-widget.dn-history")
            rows = big.locator(".dn-scroll .dn-row")
            event_id = big.locator(".dn-scroll .dn-id")
            expect(event_id.filter(has_text=re.compile(r"^1$"))).to_be_visible()
            assert rows.count() <= 100, f"{rows.count()} rows in the page"
            scroller = big.locator(".dn-scroll")
            scroller.evaluate("el => { el.scrollTop = el.scrollHeight; }")
            expect(event_id.filter(has_text=re.compile(r"^20000$"))).to_be_visible()
            assert rows.count() <= 100, f"{rows.count()} rows in the page after scrolling"
            scroller.evaluate("el => { el.scrollTop = 10000 * 26; }")  # rows are 26 px
            middle = event_id.filter(has_text=re.compile(r"^10001$"))
            expect(middle).to_be_visible()
            middle.click()  # the kernel sends the selected row's attributes
            expect(big.locator(".dn-detail")).to_contain_text("m10001")
            big.screenshot(path=str(ARTIFACTS / "jupyterlab-history-view-20k.png"))

            # No widget failed to render (its text repr or an error instead of the view).
            expect(notebook.get_by_text("Error displaying widget")).to_have_count(0)
            expect(notebook.locator(".jp-OutputArea-output", has_text="Traceback")).to_have_count(0)
            cells.first.scroll_into_view_if_needed()
            shot(page, "notebook")

            # 5. The web UI of the server extension lists the runs and shows their history.
            ui = browser.new_page(viewport={"width": 1280, "height": 900})
            ui.set_default_timeout(TIMEOUT_MS)
            ui.on("pageerror", lambda err: problems.append(f"web UI page error: {err}"))
            ui.goto(lab.url("durable/"))
            expect(ui.get_by_role("link", name="flaky-lab")).to_be_visible()
            ui.get_by_role("link", name="hello-lab").click()
            expect(ui.get_by_role("heading", name="Workflow hello-lab")).to_be_visible()
            expect(
                ui.locator("#history").get_by_role("cell", name="greet", exact=True)
            ).to_be_visible()
            ui.screenshot(path=str(ARTIFACTS / "jupyterlab-web-ui.png"), full_page=True)
            ui.get_by_role("link", name="All executions").click()
            ui.get_by_role("link", name="flaky-lab").click()
            expect(ui.get_by_role("heading", name="Workflow flaky-lab")).to_be_visible()
            step = ui.locator("#history").get_by_role("row").filter(has_text="flaky_step")
            expect(step).to_contain_text("completed")
            expect(
                step.get_by_role("cell", name="\u00d73", exact=True)
            ).to_be_visible()  # attempt 3 (x3)
            ui.screenshot(path=str(ARTIFACTS / "jupyterlab-web-ui-retries.png"), full_page=True)
        except BaseException:
            try:
                page.screenshot(path=str(ARTIFACTS / "jupyterlab-failure.png"))
                outputs = page.locator(".jp-Notebook .jp-Cell").evaluate_all(
                    "cells => cells.map((c, i) => `[${i}] ` + "
                    "(c.querySelector('.jp-OutputArea')?.innerText ?? ''))"
                )
                print("Cell outputs:\n" + "\n".join(outputs))
            except Exception as err:  # the page may be gone: the log still tells
                problems.append(f"no failure screenshot or outputs: {err}")
            print("Browser console errors:\n" + "\n".join(problems or ["(none)"]))
            print(traffic.report())
            kernels = dump_kernel_stacks(kernels_of(lab.root.parent / "runtime"))
            print(f"Kernels asked for their threads' stacks (in the log): {kernels}")
            print(f"Server log: {ARTIFACTS / 'jupyterlab-server.log'}; its end:")
            print(log_tail(lab.log, 200))
            raise
        finally:
            browser.close()
            expect.set_options(timeout=None)  # back to Playwright's default for other tests
    print("Browser console errors:\n" + "\n".join(problems or ["(none)"]))
    pageerrors = [p for p in problems if "page error" in p]
    assert pageerrors == [], "\n".join(pageerrors)
