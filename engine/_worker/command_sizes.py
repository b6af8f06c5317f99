"""Whether a workflow task's completion is small enough to send, as Temporal's worker
checks it: each payload against the namespace's limits, the whole task against the 4 MB a
gRPC message may carry; and how a refused completion fails its task."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._model import commands as cmd
from .._payload_size import json_payload_size, warn_payload_size
from ..converter import (
    MAX_PAYLOAD_BYTES,
    MAX_TRANSACTION_BYTES,
    Payload,
    check_payloads_size,
)
from ..exceptions import ApplicationError, PayloadSizeError
from ..service import PayloadLimitsConfig

#: How Temporal refuses a completion whose payloads are over the limits. temporalio 1.35's
#: worker (sdk-core, ``crates/sdk-core/src/worker/client.rs``, ``complete_workflow_task``)
#: runs ``check_payload_limits`` (``temporalio_client``'s payload-limit visitor) over the
#: RespondWorkflowTaskCompleted request before sending it: every payload field (a command's
#: input, result, failure details, marker details, ...) and every memo is measured against
#: the namespace's error limits (``limit.blobSize.error`` and ``limit.memoSize.error``, 2 MB
#: each by default, read with DescribeNamespace). The first field over its limit makes the
#: worker send RespondWorkflowTaskFailed instead, with cause PAYLOADS_TOO_LARGE and an
#: application failure of type "PayloadSizeLimitExceeded" (``payload_size_exceeded_failure``
#: there), not CAUSE_UNHANDLED; its message is a fixed "[TMPRL1103] Attempted to upload
#: payloads with size that exceeded the error limit.", where ours names the command and the
#: size. The run is neither failed nor terminated: the server records WorkflowTaskFailed and
#: schedules the task again (``service/history/api/respondworkflowtaskfailed/api.go``; it
#: records a failure of the first attempt only, later ones leave no event, like this
#: engine's transient retries), so a fixed deployment carries the run on. (With
#: ``disable_payload_error_limit=True`` the server's own check, ``workflow_size_checker.go``
#: and ``workflow_task_completed_handler.go`` in ``respondworkflowtaskcompleted``, would
#: terminate the run instead, e.g. "BadScheduleActivityAttributes:
#: ScheduleActivityTaskCommandAttributes.Input exceeds size limit."; this engine does what
#: the default worker does.)
CAUSE_PAYLOADS_TOO_LARGE = "WORKFLOW_TASK_FAILED_CAUSE_PAYLOADS_TOO_LARGE"
#: A completion over the 4 MB that one gRPC message may carry never reaches the server;
#: sdk-core (``crates/sdk-core/src/worker/workflow/mod.rs``, on the completion's
#: "message too large" status) then fails the task with cause GRPC_MESSAGE_TOO_LARGE and
#: a non-retryable application failure of type "GrpcMessageTooLarge". The engine's 4 MB
#: per workflow task stands for that limit.
CAUSE_GRPC_MESSAGE_TOO_LARGE = "WORKFLOW_TASK_FAILED_CAUSE_GRPC_MESSAGE_TOO_LARGE"


class _TaskTooLarge(PayloadSizeError):
    """The commands of one workflow task together carry more than 4 MB."""


def size_refusal(err: PayloadSizeError) -> tuple[str, ApplicationError]:
    """The workflow-task failure cause and failure for a refused completion."""
    if isinstance(err, _TaskTooLarge):
        return CAUSE_GRPC_MESSAGE_TOO_LARGE, ApplicationError(
            str(err), type="GrpcMessageTooLarge", non_retryable=True
        )
    return CAUSE_PAYLOADS_TOO_LARGE, ApplicationError(str(err), type="PayloadSizeLimitExceeded")


def check_command_sizes(
    commands: list[cmd.Command], limits: PayloadLimitsConfig | None = None
) -> None:
    """Refuse commands whose payloads are over the limits: 2 MB per payload field of a
    command (its input, result, failure details, ...), 4 MB for the whole task; log a
    warning for a field over ``limits``' threshold (a memo field: its memo threshold).

    Sizes are read off the base64 lengths (exact for the canonical base64 our converter
    writes); payloads are decoded, and messages built, only when a limit is passed."""
    total = 0
    for command in commands:
        for part, payloads in _payloads_of(command):
            size = 0
            for payload in payloads:
                size += json_payload_size(payload)
            if size > MAX_PAYLOAD_BYTES:
                check_payloads_size(
                    [Payload.from_json(p) for p in payloads], what=_name_of(command, part)
                )
            elif limits is not None:
                warn_at = (
                    limits.memo_warn_size if part.startswith("memo:") else limits.payloads_warn_size
                )
                if warn_at and size > warn_at:
                    warn_payload_size(_name_of(command, part), size, warn_at)
            total += size
    if total > MAX_TRANSACTION_BYTES:
        carried = [Payload.from_json(p) for c in commands for _, ps in _payloads_of(c) for p in ps]
        try:
            check_payloads_size(
                carried, what="the commands of one workflow task", limit=MAX_TRANSACTION_BYTES
            )
        except PayloadSizeError as err:
            raise _TaskTooLarge(str(err)) from None


_NO_PAYLOADS: tuple[tuple[str, list[dict[str, Any]]], ...] = ()


def _payloads_of(command: cmd.Command) -> Sequence[tuple[str, list[dict[str, Any]]]]:
    """The payload fields a command carries, each as (which field, its payloads).

    Memo: ``upsert_memo``'s fields (``ModifyWorkflowProperties``) and the memo of a child
    or of a continue-as-new, each field checked like a payload field, as sdk-core checks a
    command's memo."""
    if isinstance(command, cmd.ScheduleActivityTask):
        return (("input", command.input),)
    if isinstance(command, cmd.StartChildWorkflowExecution):
        return (("input", command.input), *_memo_fields(command.memo))
    if isinstance(command, cmd.SignalExternalWorkflowExecution):
        return (("input", command.input),)
    if isinstance(command, cmd.CompleteWorkflowExecution):
        return (("result", command.result),)
    if isinstance(command, cmd.ContinueAsNewWorkflowExecution):
        return (("input", command.input), *_memo_fields(command.memo))
    if isinstance(command, cmd.CompleteUpdate):
        if command.failure is not None:
            return (("failure", _failure_payloads(command.failure)),)
        return (("result", command.result or []),)
    if isinstance(command, cmd.FailWorkflowExecution):
        return (("failure", _failure_payloads(command.failure)),)
    if isinstance(command, cmd.CancelWorkflowExecution):
        return (("details", command.details),)
    if isinstance(command, cmd.RecordMarker):
        details = [p for field in command.details.values() for p in field.get("payloads") or []]
        if command.failure is not None:
            return (("details", details), ("failure", _failure_payloads(command.failure)))
        return (("details", details),)
    if isinstance(command, cmd.UpsertWorkflowSearchAttributes):
        return (("values", list(command.search_attributes.values())),)
    if isinstance(command, cmd.ModifyWorkflowProperties):
        return tuple((f"memo:{k}", [v]) for k, v in command.upserted_memo.items())
    return _NO_PAYLOADS


def _memo_fields(memo: dict[str, Any] | None) -> list[tuple[str, list[dict[str, Any]]]]:
    return [(f"memo:{k}", [v]) for k, v in ((memo or {}).get("fields") or {}).items()]


def _name_of(command: cmd.Command, part: str) -> str:
    """How an error names one payload field of a command (built only for an error)."""
    if isinstance(command, cmd.ScheduleActivityTask):
        return f"input of activity {command.activity_type}"
    if isinstance(command, cmd.StartChildWorkflowExecution):
        child = f"child workflow {command.workflow_type} (id {command.workflow_id!r})"
        if part.startswith("memo:"):
            return f"memo field {part.removeprefix('memo:')!r} of {child}"
        return f"input of {child}"
    if isinstance(command, cmd.SignalExternalWorkflowExecution):
        return f"input of signal {command.signal_name!r} to workflow {command.workflow_id!r}"
    if isinstance(command, cmd.CompleteWorkflowExecution):
        return "workflow result"
    if isinstance(command, cmd.ContinueAsNewWorkflowExecution):
        if part.startswith("memo:"):
            return f"memo field {part.removeprefix('memo:')!r} of the continue-as-new"
        return f"continue-as-new input of workflow {command.workflow_type}"
    if isinstance(command, cmd.CompleteUpdate):
        update = f"update {command.name!r}" if command.name else f"update id {command.update_id!r}"
        return f"{'failure details' if part == 'failure' else 'result'} of {update}"
    if isinstance(command, cmd.FailWorkflowExecution):
        return "failure details of the workflow"
    if isinstance(command, cmd.CancelWorkflowExecution):
        return "cancellation details of the workflow"
    if isinstance(command, cmd.RecordMarker):
        which = "failure details" if part == "failure" else "details"
        return f"{which} of marker {command.marker_name!r}"
    if isinstance(command, cmd.UpsertWorkflowSearchAttributes):
        names = ", ".join(repr(n) for n in sorted(command.search_attributes))
        return f"values of search attributes {names}"
    if isinstance(command, cmd.ModifyWorkflowProperties):
        return f"memo field {part.removeprefix('memo:')!r} of upsert_memo"
    return command.describe()


def _failure_payloads(failure: dict[str, Any]) -> list[dict[str, Any]]:
    """Every payload in a Failure: its info's details, its encoded attributes, and those
    of its causes."""
    out: list[dict[str, Any]] = []
    node: Any = failure
    while isinstance(node, dict):
        for key, info in node.items():
            if key.endswith("FailureInfo") and isinstance(info, dict):
                for field_name in ("details", "lastHeartbeatDetails"):
                    held = info.get(field_name)
                    if isinstance(held, dict):
                        out += held.get("payloads") or []
        encoded = node.get("encodedAttributes")
        if isinstance(encoded, dict):
            out.append(encoded)
        node = node.get("cause")
    return out
