"""What the JupyterLab browser tests share: a ``jupyter lab`` subprocess on loopback with a
token, isolated config and settings, and the server extension enabled; a script that marks
the page when a script error happens."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO, Any

from .chromium import free_port

# JupyterLab user settings for the tests (an isolated settings dir): no news or update
# toasts over the screenshots, and every cell kept in the DOM (no windowing).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}

# Marks the page when a script error happens (e.g. a widget's render() throws), so that
# waiting for a widget ends at once instead of at the timeout.
MARK_PAGE_ERRORS = """
(() => {
  const mark = (what) => {
    document.documentElement.dataset.pageError = String(what).slice(0, 500);
  };
  window.addEventListener("error", (e) => mark(e.message));
  window.addEventListener("unhandledrejection", (e) => mark(e.reason));
})();
"""


# An IPython startup file for the test servers' kernels.
STACKS_ON_SIGUSR1 = """\
import faulthandler, signal, sys
faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
"""


def start_jupyterlab(
    tmp_path: Path, root: Path, token: str, log: IO[str]
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``jupyter lab`` serving ``root``, its output to ``log``; returns the process
    and its base URL. Config, runtime, data, settings and workspaces live under
    ``tmp_path``; the server's store is the extension's default under ``root``."""
    settings = tmp_path / "lab-settings"
    for name, value in LAB_SETTINGS.items():
        target = settings / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(value))
    # Kernels (IPython) run this at start: SIGUSR1 makes a kernel write every thread's
    # stack to its stderr, which is the server's log (see dump_kernel_stacks).
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-stacks-on-sigusr1.py").write_text(STACKS_ON_SIGUSR1)
    port = free_port()
    env = {
        **os.environ,
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
    }
    # No URL: the server extension picks its default under root_dir and hands it to kernels.
    env.pop("DURABLE_DATABASE_URL", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            # An editable install has no enabling JSON in sys.prefix (`make install` copies
            # it): enable the server extension here so the tests do not depend on that.
            "--ServerApp.jpserver_extensions={'kernel_ext': True}",
            *(["--allow-root"] if os.geteuid() == 0 else []),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return proc, f"http://127.0.0.1:{port}/"


def wait_until_up(proc: subprocess.Popen[bytes], status_url: str, timeout: float = 45) -> bool:
    """Whether the server answered ``status_url`` within ``timeout`` (False once it exited
    or the time is up)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(status_url, timeout=1):
                return True
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.2)


def shut_down(proc: subprocess.Popen[bytes], shutdown_url: str) -> None:
    """Ask the server to shut down (it shuts its kernels down) and wait for it; terminate,
    then kill it if it does not go."""
    if proc.poll() is not None:
        return
    try:
        request = urllib.request.Request(shutdown_url, method="POST", data=b"")
        urllib.request.urlopen(request, timeout=5).close()
    except OSError:
        proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def new_lab_page(browser: Any, problems: list[str], timeout_ms: int) -> Any:
    """A page for JupyterLab (1400x1000) whose script errors mark the page and, with the
    console's errors, go to ``problems``."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(timeout_ms)
    page.add_init_script(MARK_PAGE_ERRORS)
    page.on("pageerror", lambda err: problems.append(f"page error: {err}"))
    page.on(
        "console",
        lambda msg: (
            problems.append(f"console {msg.type}: {msg.text} ({msg.location})")
            if msg.type == "error"
            else None
        ),
    )
    return page


class KernelTraffic:
    """The kernel messages a page sends and receives over its kernel websockets, kept
    short (direction, channel, type, id, parent id; the subshell, comm and comm target
    where there is one) so that a failed test can print what the browser and the kernel
    said to each other: whether a request left the page, and whether the kernel answered.

    Jupyter Server speaks two framings: the ``v1.kernel.websocket.jupyter.org`` binary one
    (a little-endian uint64 part count, that many uint64 offsets, then the parts: channel,
    header, parent header, metadata, content, buffers) and the older JSON text one."""

    def __init__(self, page: Any, keep: int = 400) -> None:
        self.keep = keep
        self.messages: list[str] = []
        self.counts: dict[str, int] = {}
        self._began = time.monotonic()
        page.on("websocket", self._on_websocket)

    def _on_websocket(self, ws: Any) -> None:
        if "/api/kernels/" not in ws.url:
            return
        self._note("--", f"websocket opened {ws.url.split('?')[0]}")
        ws.on("framesent", lambda payload: self._frame(">>", payload))
        ws.on("framereceived", lambda payload: self._frame("<<", payload))
        ws.on("close", lambda _ws: self._note("--", "websocket closed"))

    def _frame(self, direction: str, payload: str | bytes) -> None:
        try:
            channel, header, parent, content = _kernel_frame(payload)
        except (ValueError, KeyError, TypeError, IndexError) as err:
            self._note(direction, f"undecoded frame ({len(payload)} bytes): {err}")
            return
        msg_type = header.get("msg_type", "?")
        key = f"{direction} {channel} {msg_type}"
        self.counts[key] = self.counts.get(key, 0) + 1
        # Where a message goes or what it is about: the subshell it is sent to (JupyterLab
        # 4.4+ sends comms over kernel subshells), the subshell made or deleted, the comm.
        about = [
            f"{name}={str(value)[-8:]}"
            for name, value in (
                ("subshell", header.get("subshell_id")),
                ("made", content.get("subshell_id") if "subshell" in msg_type else None),
                ("comm", content.get("comm_id")),
            )
            if value
        ]
        if content.get("target_name"):
            about.append(f"target={content['target_name']}")
        self._note(
            direction,
            f"{channel} {msg_type} id={str(header.get('msg_id', ''))[-12:]} "
            f"parent={str(parent.get('msg_id', ''))[-12:]} ({parent.get('msg_type', '')})"
            + "".join(f" {a}" for a in about),
        )

    def _note(self, direction: str, text: str) -> None:
        self.messages.append(f"{time.monotonic() - self._began:8.3f} {direction} {text}")
        del self.messages[: -self.keep]

    def report(self, last: int = 120) -> str:
        """Counts per direction, channel and type, then the last ``last`` messages."""
        counts = [f"  {n:5d} {key}" for key, n in sorted(self.counts.items())]
        return "\n".join(
            ["Kernel messages by direction, channel and type:", *counts]
            + [f"The last {min(last, len(self.messages))} kernel messages:"]
            + [f"  {line}" for line in self.messages[-last:]]
        )


def _kernel_frame(
    payload: str | bytes,
) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(channel, header, parent header, content) of one kernel websocket frame."""
    if isinstance(payload, str):
        msg = json.loads(payload)
        return (
            msg.get("channel", "?"),
            msg.get("header", {}),
            msg.get("parent_header", {}),
            msg.get("content", {}),
        )
    count = int.from_bytes(payload[:8], "little")
    offsets = [int.from_bytes(payload[8 + 8 * i : 16 + 8 * i], "little") for i in range(count)]
    parts = [payload[a:b] for a, b in zip(offsets, [*offsets[1:], len(payload)], strict=True)]
    return parts[0].decode(), json.loads(parts[1]), json.loads(parts[2]), json.loads(parts[4])


def log_tail(path: Path, lines: int = 60) -> str:
    """The last ``lines`` lines of a log file (what CI prints when the file is gone)."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError as err:
        return f"(no log: {err})"
    return "\n".join(text[-lines:])


def dump_kernel_stacks(kernels: list[int], settle: float = 1.0) -> list[int]:
    """Ask each of ``kernels`` (pids, from :func:`kernels_of`: SIGUSR1 would end any other
    process) to write its threads' stacks to the server's log (see ``STACKS_ON_SIGUSR1``):
    what a kernel that never answers is doing. Returns the kernels signalled."""
    signalled = []
    for pid in kernels:
        try:
            os.kill(pid, signal.SIGUSR1)
        except ProcessLookupError:
            continue
        signalled.append(pid)
    if signalled:
        time.sleep(settle)
    return signalled


def kernels_of(runtime_dir: Path) -> list[int]:
    """The pids of the kernels whose connection file is in ``runtime_dir`` (the test
    server's ``JUPYTER_RUNTIME_DIR``): the kernels that server started."""
    found = []
    marker = str(runtime_dir).encode()
    for cmdline_path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmdline = cmdline_path.read_bytes()
        except OSError:
            continue
        if b"ipykernel" in cmdline and marker in cmdline:
            found.append(int(cmdline_path.parent.name))
    return found
