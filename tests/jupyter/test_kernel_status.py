"""The kernel the project installs says when each cell is done, under the messages our
widgets send while cells run.

JupyterLab shows a cell as running (``[*]``) until the kernel's ``status: idle`` message
that names the cell's own ``execute_request`` arrives. Our widgets' views send a comm
message (``{"type": "view", "open": ...}``) when they render, which during Run All is while
later cells run. ipykernel 7.4.0 handles such a message at once even during an async cell,
and then writes the cell's parent header back into the context every shell message
shares, over the header of a cell that began meanwhile: that cell's idle status names the
cell before it, and it stays ``[*]`` for good (the notebook browser tests met it about one
run in five). This test shows the bug in seconds with 7.4.0 (some ten of sixty cells lose
their idle) and holds with 7.3 and 6.x. ``pyproject.toml`` keeps ipykernel below 7: 7.3
has another bug (a shell request left unread), see the comment there.
"""

from __future__ import annotations

import queue
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

CELLS = 60
QUIET_S = 2.0  # IOPub silent this long after the last reply: nothing more is coming
DEADLINE_S = 60.0


@pytest.fixture
def kernel_client() -> Iterator[Any]:
    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.timeout(120)
def test_every_cell_gets_its_own_idle_status_while_views_send_comm_messages(
    kernel_client: Any,
) -> None:
    kc = kernel_client
    kc.execute_interactive("import asyncio", timeout=30)
    cells = []
    for i in range(CELLS):
        # An async cell (as the notebooks' cells are), then what a view sends on render.
        cells.append(kc.execute(f"await asyncio.sleep(0.002); {i}"))
        view = {"comm_id": uuid.uuid4().hex, "data": {"type": "view", "open": True}}
        kc.shell_channel.send(kc.session.msg("comm_msg", view))

    replies: set[str] = set()
    idle: Counter[str] = Counter()
    deadline = time.monotonic() + DEADLINE_S
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        got = False
        try:
            while True:
                reply = kc.get_shell_msg(timeout=0)
                replies.add(reply["parent_header"].get("msg_id"))
                got = True
        except queue.Empty:
            pass
        try:
            msg = kc.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            msg = None
        if msg is not None:
            got = True
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                idle[msg["parent_header"].get("msg_id")] += 1
        if got:
            quiet_since = time.monotonic()
        everything = replies.issuperset(cells) and all(idle[c] for c in cells)
        if everything or (replies.issuperset(cells) and time.monotonic() - quiet_since > QUIET_S):
            break

    assert replies.issuperset(cells), f"{len(set(cells) - replies)} cells got no reply"
    without = [n for n, c in enumerate(cells) if idle[c] == 0]
    twice = [n for n, c in enumerate(cells) if idle[c] > 1]
    assert not without and not twice, (
        f"cells whose idle status named another request: none for cells {without}, "
        f"two for cells {twice} (JupyterLab shows the first ones running forever)"
    )
