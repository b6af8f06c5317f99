"""The worker's payload limits on the commands of one workflow task (2 MB per payload
set, 4 MB per task), checked without decoding payloads unless a limit is passed."""

from __future__ import annotations

import pytest

from engine import DataConverter
from engine._model import commands as cmd
from engine._payload_size import json_payload_size
from engine._worker.command_sizes import check_command_sizes
from engine.converter import Payload
from engine.exceptions import PayloadSizeError

MB = 1024 * 1024
dc = DataConverter.default


def _activity(n: int, data: str) -> cmd.ScheduleActivityTask:
    return cmd.ScheduleActivityTask(
        seq=n,
        activity_id=str(n),
        activity_type="charge",
        task_queue="q",
        input=dc.to_payloads_json([data]),
        schedule_to_close=None,
        schedule_to_start=None,
        start_to_close=10.0,
        heartbeat_timeout=None,
        retry_policy={},
    )


def test_sizes_read_off_base64_equal_the_decoded_sizes() -> None:
    for value in ["", "x", "xy", "xyz", "é" * 1001, None, {"k": [1, 2]}, b"\x00\x01"]:
        for payload in dc.to_payloads_json([value]):
            assert json_payload_size(payload) == Payload.from_json(payload).size


def test_limits_per_payload_set_and_per_task() -> None:
    check_command_sizes([_activity(1, "x" * (2 * MB - 100))])  # just under: accepted
    with pytest.raises(PayloadSizeError, match="input of activity charge is"):
        check_command_sizes([_activity(1, "x" * (2 * MB + 10))])
    result = cmd.CompleteWorkflowExecution(result=dc.to_payloads_json(["y" * (2 * MB + 10)]))
    with pytest.raises(PayloadSizeError, match="workflow result is"):
        check_command_sizes([result])
    three = [_activity(i, "z" * (1 * MB + 512 * 1024)) for i in range(3)]  # 4.5 MB together
    with pytest.raises(PayloadSizeError, match="the commands of one workflow task"):
        check_command_sizes(three)
    check_command_sizes(three[:2])
