"""Every teaching notebook, run with "Run All" in JupyterLab, still shows what it teaches.

For each notebook in ``notebooks/`` (one test each): a ``jupyter lab`` subprocess on
loopback with a token, the server extension and an isolated settings dir (no windowing, so
every cell stays in the DOM); the notebook and ``notebooks/data/`` are copied into a fresh
root dir (the server's own database goes there too). Debian's Chromium, driven by
Playwright, opens the notebook, clears its outputs and runs all cells from the Run menu,
then waits (at most :data:`RUN_TIMEOUT_S`) until every code cell has run and the kernel is
idle. Then:

- every code cell has an execution count, in order, and no cell has an error output or a
  traceback on stderr (the notebook is saved from the browser and its file read back: an
  ``error`` output is unambiguous there, where the page renders errors as stderr);
- every widget output of the saved notebook still shows its widget in the page after the
  run, clean-up cells included: at the same place (code cell, output), the view the
  widget's ES module or ipywidgets box draws (``.dn-widget``), with content; no output is
  left hidden and empty (what a closed widget leaves), and no "Error displaying widget" or
  "model not found" anywhere.

A screenshot of the whole notebook goes to ``test-artifacts/notebook-<name>-after-run-all.png``
(the viewport made as tall as the notebook); on failure also
``notebook-<name>-failure.png`` and the server log ``notebook-<name>-server.log``.

Needs ``/usr/bin/chromium`` (``apt-get install -y chromium``); never ``playwright install``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .chromium import ARTIFACTS, ROOT, launch, require_chromium
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

NOTEBOOKS = ROOT / "notebooks"
TOKEN = "notebooks-browser-test-token"
RUN_TIMEOUT_S = 180  # Run All, from the click to the last cell done and the kernel idle
TIMEOUT_MS = 30_000  # any other single wait in the page
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SCREENSHOT_MAX_HEIGHT = 30_000  # px; a taller notebook is shot from its top

# The state of the run, read in the page: the code cells' prompts ("[3]:", "[*]:", "[ ]:").
RUN_STATE = """
() => {
  const prompts = [...document.querySelectorAll(
    ".jp-NotebookPanel .jp-Notebook .jp-CodeCell .jp-InputArea-prompt")]
    .map((p) => p.textContent.trim());
  const status = document.querySelector("#jp-main-statusbar")?.innerText ?? "";
  return {prompts, idle: /Python 3 \\(ipykernel\\) \\| Idle/.test(status)};
}
"""

# What the page shows for each widget output of the saved notebook: ``places`` are
# [code cell index, output index] pairs; each output is one ``.jp-OutputArea-child``.
WIDGET_OUTPUTS = """
(places) => {
  const cells = [...document.querySelectorAll(
    ".jp-NotebookPanel .jp-Notebook .jp-CodeCell")];
  return places.map(([cellIndex, outputIndex]) => {
    const area = cells[cellIndex]?.querySelector(".jp-OutputArea");
    const child = area ? area.querySelectorAll(":scope > .jp-OutputArea-child")[outputIndex] : null;
    const out = child?.querySelector(".jp-OutputArea-output");
    // The widget manager renders a view into a panel (ipywidgets' views have the class
    // jupyter-widgets, anywidget's do not); ours carry dn-widget.
    const shown = out?.classList.contains("lm-Panel") ? out.querySelector(":scope > .lm-Widget") : null;
    const view = shown?.matches(".dn-widget") ? shown : shown?.querySelector(".dn-widget");
    const box = view ? view.getBoundingClientRect() : null;
    return {
      cell: cellIndex,
      output: outputIndex,
      found: Boolean(out),
      hidden: Boolean(out?.classList.contains("lm-mod-hidden")),
      widget: Boolean(shown),
      classes: view ? String(view.className) : null,
      height: box ? Math.round(box.height) : 0,
      elements: view ? view.querySelectorAll("*").length : 0,
      text: ((view ?? out)?.innerText ?? "").trim().replace(/\\s+/g, " ").slice(0, 120),
    };
  });
}
"""

# Outputs JupyterLab keeps but hides: what a widget leaves once its model is closed.
HIDDEN_OUTPUTS = """
() => [...document.querySelectorAll(
  ".jp-NotebookPanel .jp-Notebook .jp-CodeCell .jp-OutputArea-output.lm-mod-hidden")]
  .map((out) => {
    const cells = [...document.querySelectorAll(".jp-NotebookPanel .jp-Notebook .jp-CodeCell")];
    return cells.indexOf(out.closest(".jp-CodeCell"));
  })
"""


def _widget_problem(view: dict[str, Any]) -> str | None:
    """What is wrong with one widget output as the page shows it, or None."""
    where = f"code cell {view['cell']}, output {view['output']}"
    if not view["found"]:
        return f"{where}: no such output in the page"
    if view["hidden"] or not view["widget"]:
        return f"{where}: the widget is gone (hidden: {view['hidden']}; text {view['text']!r})"
    if view["classes"] is None:
        return f"{where}: a widget, but not one of ours: {view['text']!r}"
    if view["height"] < 20 or view["elements"] < 3 or not view["text"]:
        return f"{where}: {view['classes']} is empty ({view['height']} px, {view['text']!r})"
    return None


# The notebook's scrolling area, and the height of its content.
NOTEBOOK_HEIGHT = """
() => {
  const nb = document.querySelector(".jp-NotebookPanel .jp-WindowedPanel-outer")
    ?? document.querySelector(".jp-NotebookPanel .jp-Notebook");
  return nb ? nb.scrollHeight : 0;
}
"""


def _notebook_names() -> list[str]:
    return sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


@dataclass
class Lab:
    """A running ``jupyter lab``: its base URL, root directory, log and process."""

    base: str
    root: Path
    log: Path
    proc: subprocess.Popen[bytes]
    # The processes the server started (its kernels, in process groups of their own, and
    # what they started, e.g. notebook 04's worker process): pid -> start time.
    descendants: dict[int, int] = field(default_factory=dict)

    def url(self, path: str) -> str:
        """``path`` under the server, with the token."""
        return f"{self.base}{path}{'&' if '?' in path else '?'}token={TOKEN}"

    def note_descendants(self) -> None:
        """Remember the server's descendants, to make sure of them at the end."""
        self.descendants.update(_descendants(self.proc.pid))


def _processes() -> dict[int, tuple[int, int]]:
    """Every process (from /proc): pid -> (parent pid, start time in clock ticks)."""
    found: dict[int, tuple[int, int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # pid (comm) state ppid ... starttime (field 22): comm may hold spaces and ")".
        fields = text[text.rindex(")") + 2 :].split()
        found[int(stat.parent.name)] = (int(fields[1]), int(fields[19]))
    return found


def _descendants(pid: int) -> dict[int, int]:
    """The processes below ``pid``: pid -> start time."""
    processes = _processes()
    found: dict[int, int] = {}
    parents = {pid}
    while parents:
        children = {p for p, (ppid, _) in processes.items() if ppid in parents and p not in found}
        found.update({p: processes[p][1] for p in children})
        parents = children
    return found


def _still_running(pid: int, started: int) -> bool:
    """Whether process ``pid`` is the one that started at ``started`` and still runs."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0] != "Z" and int(fields[19]) == started


def _stop(lab: Lab) -> None:
    """Shut the server down (it shuts its kernels down), then make sure that the server
    and every process below it are gone (each by its pid, and only if it is still the
    process that was noted)."""
    proc = lab.proc
    if proc.poll() is None:
        lab.note_descendants()
    shut_down(proc, lab.url("api/shutdown"))
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        left = [pid for pid, started in lab.descendants.items() if _still_running(pid, started)]
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(
            _still_running(pid, lab.descendants[pid]) for pid in left
        ):
            time.sleep(0.1)


def _start_lab(tmp_path: Path) -> Lab:
    root = tmp_path / "root"
    root.mkdir()
    log_path = tmp_path / "lab.log"
    with log_path.open("w") as log:
        # The server's store is its default under root_dir (the temporary root). The
        # notebooks point their kernels at databases of their own.
        proc, base = start_jupyterlab(tmp_path, root, TOKEN, log)
    lab = Lab(base=base, root=root, log=log_path, proc=proc)
    if not wait_until_up(proc, lab.url("api/status")):
        _stop(lab)
        pytest.fail(f"jupyter lab did not start:\n{log_path.read_text()}")
    return lab


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """``jupyter lab`` on loopback with a token, rooted in a fresh temporary directory."""
    require_chromium()
    lab = _start_lab(tmp_path)
    try:
        yield lab
    finally:
        _stop(lab)


def _menu(page: Any, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{menu}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^{re.escape(item)}$")).click()


def _wait_for_run(page: Any, code_cells: int) -> dict[str, Any]:
    """Wait until Run All has finished: no cell queued or running ("[*]"), the last code
    cell has run (or a cell failed, which stops the run) and the kernel is idle."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    numbered = re.compile(r"^\[\d+\]:$")
    state: dict[str, Any] = {}
    settled_since: float | None = None
    while time.monotonic() < deadline:
        state = page.evaluate(RUN_STATE)
        prompts = state["prompts"]
        busy = any("*" in p for p in prompts)
        failed = (
            page.locator(".jp-Notebook .jp-OutputArea-output").filter(has_text="Traceback").count()
        )
        done = (
            len(prompts) == code_cells
            and not busy
            and state["idle"]
            and (numbered.match(prompts[-1]) is not None or failed > 0)
        )
        if done:
            # Idle between two cells lasts a moment: settled means done for half a second.
            settled_since = settled_since or time.monotonic()
            if time.monotonic() - settled_since > 0.5:
                return state
        else:
            settled_since = None
        time.sleep(0.25)
    raise AssertionError(
        f"Run All did not finish within {RUN_TIMEOUT_S} s: prompts {state.get('prompts')}, "
        f"kernel idle: {state.get('idle')}"
    )


def _shoot_whole_notebook(page: Any, path: Path) -> None:
    """A screenshot of every cell: the viewport made as tall as the notebook's content
    (JupyterLab scrolls inside its panel, so a "full page" shot alone shows one screen)."""
    height = int(page.evaluate(NOTEBOOK_HEIGHT))
    viewport = page.viewport_size or {"width": 1400, "height": 1000}
    chrome = 200  # menu bar, tab bar, toolbar and status bar around the notebook
    tall = min(max(viewport["height"], height + chrome), SCREENSHOT_MAX_HEIGHT)
    page.set_viewport_size({"width": viewport["width"], "height": tall})
    try:
        page.wait_for_timeout(500)  # layout, and widgets resizing to their new room
        page.locator(".jp-NotebookPanel .jp-Cell").first.scroll_into_view_if_needed()
        page.screenshot(path=str(path), full_page=True)
    finally:
        page.set_viewport_size(viewport)


def _saved_notebook_problems(path: Path) -> tuple[list[str], list[tuple[int, int]]]:
    """What is wrong in the notebook saved after the run (cells without an execution
    count, counts out of order, error outputs, a traceback on stderr), and where its
    widget outputs are: (code cell index, output index) pairs. Other stderr is printed."""
    nb = json.loads(path.read_text())
    problems: list[str] = []
    widgets: list[tuple[int, int]] = []
    counts = []
    code_cells = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    for index, cell in enumerate(code_cells):
        counts.append(cell.get("execution_count"))
        if cell.get("execution_count") is None:
            problems.append(f"code cell {index} did not run")
        for position, output in enumerate(cell.get("outputs", [])):
            if output["output_type"] == "error":
                traceback = "\n".join(output.get("traceback", []))
                traceback = re.sub(r"\x1b\[[0-9;]*m", "", traceback)
                problems.append(f"code cell {index} raised {output['ename']}:\n{traceback}")
            elif output["output_type"] == "stream" and output["name"] == "stderr":
                text = "".join(output["text"])
                print(f"  stderr of code cell {index}: {text.strip()[:500]}")
                if "Traceback" in text:
                    problems.append(f"code cell {index} printed a traceback:\n{text}")
            elif WIDGET_VIEW in output.get("data", {}):
                widgets.append((index, position))
    if None not in counts and counts != list(range(1, len(counts) + 1)):
        problems.append(f"execution counts out of order: {counts}")
    return problems, widgets


def _copy_notebook(name: str, root: Path) -> int:
    """Copy notebook ``name`` and what it reads (``data/``) into ``root``; the number
    of its code cells."""
    shutil.copy(NOTEBOOKS / name, root / name)
    shutil.copytree(NOTEBOOKS / "data", root / "data")
    nb = json.loads((root / name).read_text())
    return sum(1 for cell in nb["cells"] if cell["cell_type"] == "code")


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
@pytest.mark.parametrize("name", _notebook_names())
def test_notebook_runs_all_and_keeps_its_widgets(lab: Lab, name: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    stem = name.removesuffix(".ipynb")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"notebook-{stem}-after-run-all.png"
    failure_shot = ARTIFACTS / f"notebook-{stem}-failure.png"
    failure_log = ARTIFACTS / f"notebook-{stem}-server.log"
    for stale in (shot, failure_shot, failure_log):
        stale.unlink(missing_ok=True)
    code_cells = _copy_notebook(name, lab.root)
    problems: list[str] = []  # the page's script and console errors

    with sync_playwright() as pw:
        browser = launch(pw)
        page = new_lab_page(browser, problems, TIMEOUT_MS)
        traffic = KernelTraffic(page)
        try:
            expect.set_options(timeout=TIMEOUT_MS)
            page.goto(lab.url(f"lab/tree/{name}"))
            notebook = page.locator(".jp-NotebookPanel")
            cells = notebook.locator(".jp-Notebook .jp-Cell")
            expect(notebook.locator(".jp-Notebook .jp-CodeCell")).to_have_count(code_cells)
            # The status bar says Idle only once the kernel is connected and idle (cells
            # run before that are dropped).
            kernel_idle = page.locator("#jp-main-statusbar").get_by_text(
                re.compile(r"Python 3 \(ipykernel\) \| Idle$")
            )
            expect(kernel_idle).to_be_visible()
            lab.note_descendants()

            # The saved outputs and counts go first, so that what is seen after the run
            # is what the run produced.
            _menu(page, "Edit", "Clear Outputs of All Cells")
            empty = notebook.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt")
            expect(empty.filter(has_text=re.compile(r"\d"))).to_have_count(0)

            began = time.monotonic()
            _menu(page, "Run", "Run All Cells")
            lab.note_descendants()
            _wait_for_run(page, code_cells)
            took = time.monotonic() - began
            lab.note_descendants()
            print(f"{name}: Run All took {took:.1f} s")

            # Save, then read the file: every code cell ran, in order, and none failed.
            dirty = page.locator(".lm-TabBar-tab.jp-mod-dirty")
            expect(dirty).to_have_count(1)  # the run changed it
            page.keyboard.press("Control+s")
            expect(dirty).to_have_count(0)
            saved_problems, saved_widgets = _saved_notebook_problems(lab.root / name)
            assert not saved_problems, "\n".join(saved_problems)

            # Every widget output still shows its widget, rendered, with content (they
            # render asynchronously: a few seconds are allowed).
            expect(notebook.get_by_text("Error displaying widget")).to_have_count(0)
            expect(notebook.get_by_text("model not found")).to_have_count(0)
            places = [list(place) for place in saved_widgets]
            deadline = time.monotonic() + TIMEOUT_MS / 1000
            while True:
                views = page.evaluate(WIDGET_OUTPUTS, places)
                wrong = [p for p in map(_widget_problem, views) if p]
                if not wrong or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            for view in views:
                print(
                    f"  code cell {view['cell']} output {view['output']}: {view['classes']} "
                    f"({view['height']} px, {view['elements']} elements)"
                )
            assert not wrong, "widgets not shown after Run All:\n" + "\n".join(wrong)
            hidden = page.evaluate(HIDDEN_OUTPUTS)
            assert hidden == [], f"hidden (closed widget) outputs in code cells {hidden}"
            crashed = page.locator("html[data-page-error]")
            assert crashed.count() == 0, crashed.get_attribute("data-page-error")

            _shoot_whole_notebook(page, shot)
        except BaseException:
            try:
                _shoot_whole_notebook(page, failure_shot)
                outputs_text = cells.evaluate_all(
                    "cells => cells.map((c, i) => `[${i}] ` + "
                    "(c.querySelector('.jp-OutputArea')?.innerText ?? '').slice(0, 2000))"
                )
                print("Cell outputs:\n" + "\n".join(outputs_text))
            except Exception as err:  # the page may be gone: the log still tells
                problems.append(f"no failure screenshot or outputs: {err}")
            print("Browser console errors:\n" + "\n".join(problems or ["(none)"]))
            print(traffic.report())
            kernels = dump_kernel_stacks(kernels_of(lab.root.parent / "runtime"))
            print(f"Kernels asked for their threads' stacks (in the log): {kernels}")
            shutil.copy(lab.log, failure_log)
            print(f"Server log: {failure_log}; its end:\n{log_tail(lab.log, 200)}")
            raise
        finally:
            browser.close()
            expect.set_options(timeout=None)  # back to Playwright's default for other tests
    print("Browser console errors:\n" + "\n".join(problems or ["(none)"]))
    page_errors = [p for p in problems if p.startswith("page error")]
    assert page_errors == [], "\n".join(page_errors)
