"""A regular install (a wheel, not the editable install of the test run) enables the server
extension by itself and carries the static files of the web UI and the widgets."""

from __future__ import annotations

import re
import site
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def test_pip_install_enables_the_server_extension(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "-q", "-w", wheels)
    (wheel,) = wheels.glob("durable_notebook-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = "durable_notebook-0.1.0.data/data/etc/jupyter/jupyter_server_config.d/kernel_ext.json"
    for name in (
        data,
        "engine/py.typed",
        "kernel_ext/server/static/app.js",
        "kernel_ext/server/static/index.html",
        "kernel_ext/server/static/runs.js",
        "widgets/static/history_view.js",
        "widgets/static/timeline.js",
        "widgets/static/execution_list.js",
        "widgets/static/worker_monitor.js",
        "widgets/static/common.js",
        "widgets/static/suggest.js",
        "widgets/static/widgets.css",
    ):
        assert name in names, f"{name} is missing from {wheel.name}"

    # A fresh environment that sees this one's dependencies but not its Jupyter config nor
    # the test run's editable install: installing the wheel is the only step. The running
    # interpreter's site directories are put on the new environment's path with a ``.pth``
    # file (``--system-site-packages`` would show the *base* interpreter's packages when the
    # suite itself runs in a venv). Paths added that way are not site directories, so their
    # own ``.pth`` files, the editable install's import hook among them, are not processed.
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    site_dirs = _run(python, "-c", "import site; print(site.getsitepackages()[0])").strip()
    outer = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(site_dirs) / "outer-environment.pth").write_text("".join(f"{p}\n" for p in outer))
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel)
    where = _run(
        python, "-c", "import kernel_ext, widgets; print(kernel_ext.__file__)", cwd=tmp_path
    )
    assert str(venv) in where, f"the wheel's kernel_ext is not the one imported: {where}"
    # (``jupyter server ...`` would run the base environment's ``jupyter-server`` script.)
    listing = _run(python, "-m", "jupyter_server", "extension", "list", cwd=tmp_path)
    # The listing has one section per config dir; the venv's own one must enable it (the
    # base environment's dirs are listed too, and the test run has enabled it there).
    sections = {part.split("\n", 1)[0].strip(): part for part in listing.split("Config dir:")[1:]}
    own = sections.get(str(venv / "etc" / "jupyter"))
    assert own is not None, f"no section for the venv's config dir:\n{listing}"
    own = re.sub(r"\x1b\[[0-9;]*m", "", own)  # colour codes
    line = next((ln for ln in own.splitlines() if ln.strip().startswith("kernel_ext")), "")
    assert re.fullmatch(r"\s*kernel_ext\s+enabled\s*", line), own
    assert "OK" in own.split("Validating kernel_ext", 1)[1], own
