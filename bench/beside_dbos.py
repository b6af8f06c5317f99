"""The peers' workloads on PostgreSQL, DBOS Transact and this engine side by side, in rounds.

    python bench/beside_dbos.py [--rounds 3] [--workloads W1,W2,W4] [--reps 3]
                                [--pg-url URL] [--venv DIR] [--backend postgres|sqlite]

One command for the comparison issue 17 asks for. It makes DBOS's virtual environment on
first use (``--venv``, default ``$DURABLE_PEERS_VENV`` or ``/tmp/durable-peers-venv``, from
the pins in ``bench/peers-requirements.txt``), then runs ``--rounds`` rounds. A round runs
every workload on both peers, DBOS first in odd rounds and this engine first in even ones,
so a slow spell of the machine falls on both. Each side runs in a process of its own on a
database made for it: DBOS on a new PostgreSQL database (dropped afterwards), this engine
through ``bench/run.py`` on a new schema. With ``--backend sqlite`` both use a new SQLite
file instead.

Every result line is printed as it comes; at the end a table gives, per round, each
figure of both peers and their ratio (throughput: ours / DBOS, higher is better; latency:
DBOS / ours, higher is better too).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import machine
import sqlalchemy as sa

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
#: The figures both sides print, and whether more is better.
FIGURES = {
    "W1": [("W1", "wf/s", True)],
    "W2": [("W2", "act/s", True), ("W2_step_latency", "ms", False),
           ("W2_step_latency_1wf", "ms", False)],
    "W4": [("W4_lateness_median", "ms", False), ("W4_lateness_max", "ms", False),
           ("W4_lateness_1wf", "ms", False)],
}  # fmt: skip


def peers_python(venv: Path) -> Path:
    """DBOS's interpreter, making its virtual environment first if it is missing."""
    python = venv / "bin" / "python"
    marker = venv / ".durable-peers-installed"
    pins = (BENCH / "peers-requirements.txt").read_text()
    if python.exists() and marker.exists() and marker.read_text() == pins:
        return python
    print(f"== making DBOS's virtual environment in {venv}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-r", str(BENCH / "peers-requirements.txt")],
        check=True,
    )
    marker.write_text(pins)
    return python


def parse(line: str) -> tuple[str, str, float] | None:
    """(peer, workload, value) of a result line."""
    if not line.startswith("peer="):
        return None
    fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
    try:
        return fields["peer"], fields["workload"], float(fields["value"])
    except (KeyError, ValueError):
        return None


def stream(cmd: list[str], env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    lines: list[str] = []
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, text=True, bufsize=1, cwd=REPO, env=env
    ) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            print(f"    {line}", flush=True)
            lines.append(line)
        return proc.wait(), lines


def run_dbos(python: Path, workload: str, args: argparse.Namespace) -> tuple[int, list[str]]:
    if args.backend == "sqlite":
        tmp = tempfile.mkdtemp(prefix="durable-bench-dbos-")
        try:
            url = f"sqlite:///{tmp}/dbos.sqlite"
            return stream([str(python), str(BENCH / "dbos_peer.py"), workload,
                           "--db", url, "--reps", str(args.reps)])  # fmt: skip
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    name = "bench_dbos_" + uuid.uuid4().hex[:10]
    admin = sa.create_engine(args.pg_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE {name}"))
        url = sa.make_url(args.pg_url).set(drivername="postgresql", database=name)
        return stream([str(python), str(BENCH / "dbos_peer.py"), workload,
                       "--db", url.render_as_string(hide_password=False),
                       "--reps", str(args.reps)])  # fmt: skip
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


def run_ours(workload: str, args: argparse.Namespace) -> tuple[int, list[str]]:
    return stream([sys.executable, str(BENCH / "run.py"), "--backend", args.backend,
                   "--workloads", workload, "--reps", str(args.reps), "--pg-url", args.pg_url])  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workloads", default="W1,W2,W4", help="comma-separated subset")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per figure and round")
    ap.add_argument("--backend", choices=["postgres", "sqlite"], default="postgres")
    ap.add_argument("--pg-url", default=os.environ.get("DURABLE_BENCH_PG_URL", DEFAULT_PG_URL))
    ap.add_argument(
        "--venv",
        type=Path,
        default=Path(os.environ.get("DURABLE_PEERS_VENV", "/tmp/durable-peers-venv")),
    )
    args = ap.parse_args()
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in workloads if w not in FIGURES]
    if unknown:
        ap.error(f"--workloads: unknown {', '.join(unknown)}; choose from {', '.join(FIGURES)}")
    python = peers_python(args.venv)
    print(machine.line(), flush=True)  # how fast the VM wakes threads today (bench/machine.py)
    ours_label = f"durable-{args.backend}"
    # values[(round, workload figure)] = {"ours": x, "dbos": y}
    values: dict[tuple[int, str], dict[str, float]] = {}
    failed: list[str] = []
    for rnd in range(1, args.rounds + 1):
        for workload in workloads:
            sides = ["dbos", "ours"] if rnd % 2 else ["ours", "dbos"]
            for side in sides:
                print(f"== round {rnd}: {side} {workload}", flush=True)
                if side == "dbos":
                    rc, lines = run_dbos(python, workload, args)
                else:
                    rc, lines = run_ours(workload, args)
                if rc != 0:
                    failed.append(f"round {rnd} {side} {workload} (rc={rc})")
                for line in lines:
                    got = parse(line)
                    if got is None:
                        continue
                    peer, figure, value = got
                    if peer == ours_label or peer.startswith("dbos"):
                        values.setdefault((rnd, figure), {})[side] = value
    print("\n== side by side (ratio: how many times better this engine is)")
    print(f"{'round':>5}  {'figure':<22} {'unit':<6} {ours_label:>16} {'dbos':>10} {'ratio':>7}")
    for workload in workloads:
        for figure, unit, more_is_better in FIGURES[workload]:
            for rnd in range(1, args.rounds + 1):
                got = values.get((rnd, figure), {})
                ours, dbos = got.get("ours"), got.get("dbos")
                ratio = "-"
                if ours and dbos:
                    ratio = f"{(ours / dbos if more_is_better else dbos / ours):.2f}x"
                show = [f"{v:.4g}" if v is not None else "-" for v in (ours, dbos)]
                print(f"{rnd:>5}  {figure:<22} {unit:<6} {show[0]:>16} {show[1]:>10} {ratio:>7}")
            sides_seen = [values.get((r, figure), {}) for r in range(1, args.rounds + 1)]
            ours_all = [g["ours"] for g in sides_seen if g.get("ours")]
            dbos_all = [g["dbos"] for g in sides_seen if g.get("dbos")]
            if args.rounds > 1 and ours_all and dbos_all:
                med_ours, med_dbos = statistics.median(ours_all), statistics.median(dbos_all)
                ratio = med_ours / med_dbos if more_is_better else med_dbos / med_ours
                print(
                    f"{'med':>5}  {figure:<22} {unit:<6} {med_ours:>16.4g} {med_dbos:>10.4g}"
                    f" {ratio:>6.2f}x"
                )
    if failed:
        print(f"# {len(failed)} step(s) failed: {'; '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
