"""The README's quickstart, as a reader copies it: the notebook form in a real Jupyter
kernel (top-level ``await``, ``%load_ext kernel_ext``), the script form in a fresh process.

The code comes from the README itself, so the README cannot drift from what works.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _blocks(heading: str) -> list[str]:
    """The ```python blocks of the README section that starts at ``### heading``."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"### {heading}\n")
    following = re.search(r"^#{2,3} ", text[start + 4 :], flags=re.M)
    section = text[start : start + 4 + following.start()] if following else text[start:]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DURABLE_DATABASE_URL", None)  # the README's default: ./.durable/durable.db
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def test_the_notebook_quickstart_runs_in_a_kernel(tmp_path: Path) -> None:
    cells = _blocks("In a notebook")
    assert len(cells) == 2, cells
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    NotebookClient(
        nb, timeout=90, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute(env=_env(tmp_path))  # the kernel process's environment
    errors = [o for c in nb.cells for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    out = "".join(o.get("text", "") for o in nb.cells[1].outputs if o.output_type == "stream")
    assert "charged 42 for order-8842" in out, out
    assert "'WorkflowExecutionCompleted'" in out and "'TimerFired'" in out, out
    assert (tmp_path / ".durable" / "durable.db").exists()


def test_the_script_quickstart_runs_in_a_fresh_process(tmp_path: Path) -> None:
    [script] = _blocks("In a script")
    path = tmp_path / "quickstart.py"
    path.write_text(script, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(path)],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "charged 42 for order-8842", done.stdout
    assert "'WorkflowExecutionStarted'" in lines[1] and "'WorkflowExecutionCompleted'" in lines[1]
    assert (tmp_path / ".durable" / "durable.db").exists()
