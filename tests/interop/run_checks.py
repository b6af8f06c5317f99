"""Run every ``check_*`` coroutine function of a module file and print one JSON line of
outcomes; used by ``test_activity_environment.py`` in a child process.

    python run_checks.py MODULE_FILE

Ends with ``os._exit`` (temporalio can crash during interpreter shutdown).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import traceback


def main(path: str) -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("checks_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["checks_under_test"] = module
    spec.loader.exec_module(module)
    outcomes: dict[str, str] = {}
    for name in sorted(vars(module)):
        if not name.startswith("check_"):
            continue
        try:
            asyncio.run(asyncio.wait_for(getattr(module, name)(), 30))
            outcomes[name] = "ok"
        except BaseException:
            outcomes[name] = traceback.format_exc(limit=4)
    return outcomes


if __name__ == "__main__":
    result = main(sys.argv[1])
    print(json.dumps(result), flush=True)
    os._exit(0)
