"""Record the golden histories of ``tests/replay/histories/`` from our engine.

Usage, from the repository root::

    python -m tests.replay.record_golden                  # every feature
    python -m tests.replay.record_golden timer patched    # only these
    python -m tests.replay.record_golden --list           # the feature names

Each feature is a case of ``tests/interop/cases.py``: a workflow of
``tests/interop/engine_code.py``, its input, and what the client does while it runs. The
case runs on a fresh database (with a time-skipping clock, except the cases that need
real time), and the history of its first run is written with ``WorkflowHistory.to_json()``
to ``histories/<feature>.json``. The script checks that the run closed as the case
expects (and returned the expected result, where the case says one), and writes nothing
for a case that did not.

``test_golden.py`` replays every file against the current code, and
``tests/interop/test_temporalio_replay.py`` replays them in ``temporalio``. Re-recording
gives new run ids, times and identities, so only re-record a feature when its case was
added or changed, or when the engine's recording changed on purpose. Never re-record to
make a failing replay pass: a golden history that no longer replays against unchanged
code means runs recorded by an earlier version of the engine would stop replaying.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from engine import Client
from engine.testing import WorkflowEnvironment
from tests.interop.cases import BY_FEATURE, CASES, Case, record

HISTORIES = Path(__file__).resolve().parent / "histories"


async def record_case(case: Case, workdir: Path) -> str:
    """Run ``case`` on a fresh database; return its history as Temporal's JSON."""
    url = f"sqlite:///{workdir / (case.feature + '.db')}"
    if case.real_time:
        client = await Client.connect(url)
        try:
            return (await record(client, case)).to_json() + "\n"
        finally:
            await client.close()
    env = await WorkflowEnvironment.start_time_skipping(database_url=url)
    try:
        return (await record(env.client, case)).to_json() + "\n"
    finally:
        await env.shutdown()


async def main(features: list[str]) -> int:
    cases = [BY_FEATURE[f] for f in features] if features else CASES
    HISTORIES.mkdir(exist_ok=True)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        for case in cases:
            try:
                text = await record_case(case, Path(tmp))
            except AssertionError as err:
                print(f"FAILED {case.feature}: {err}", file=sys.stderr)
                failed += 1
                continue
            path = HISTORIES / f"{case.feature}.json"
            path.write_text(text)
            print(f"wrote {path}")
    return 1 if failed else 0


def _parse(argv: list[str]) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("features", nargs="*", help="features to record (default: all)")
    parser.add_argument("--list", action="store_true", help="print the feature names and stop")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(c.feature for c in CASES))
        raise SystemExit(0)
    unknown = sorted(set(args.features) - set(BY_FEATURE))
    if unknown:
        parser.error(f"unknown feature(s) {', '.join(unknown)}; see --list")
    return list(args.features)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(_parse(sys.argv[1:]))))
