"""Unit tests for engine.exceptions: the tree, messages, fields and is_cancelled_exception."""

from __future__ import annotations

import ast
import asyncio
import builtins
import importlib
import inspect
import pkgutil
import re
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest

import engine
import engine._failure
import engine.converter
import engine.exceptions
import engine.exceptions as exc_module
from engine.common import WorkflowExecutionStatus
from engine.exceptions import (
    ActivityError,
    ApplicationError,
    ApplicationErrorCategory,
    CancelledError,
    ChildWorkflowError,
    DatabaseURLError,
    DurableError,
    Failure,
    FailureError,
    InvalidArgumentError,
    NondeterminismError,
    PayloadSizeError,
    QueryRejectCondition,
    RetryState,
    SchemaVersionError,
    ServerError,
    StoreError,
    TemporalError,
    TerminatedError,
    TimeoutError,
    TimeoutType,
    WorkflowAlreadyStartedError,
    WorkflowContinuedAsNewError,
    WorkflowFailureError,
    WorkflowNotFoundError,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    is_cancelled_exception,
)


def _activity_error(
    retry_state: RetryState | None = RetryState.NON_RETRYABLE_FAILURE,
) -> ActivityError:
    return ActivityError(
        "Activity task failed",
        scheduled_event_id=5,
        started_event_id=6,
        identity="23905@vm",
        activity_type="always_fails",
        activity_id="1",
        retry_state=retry_state,
    )


def _child_error() -> ChildWorkflowError:
    return ChildWorkflowError(
        "Child Workflow execution failed",
        namespace="default",
        workflow_id="child-1",
        run_id="run-1",
        workflow_type="Child",
        initiated_event_id=5,
        started_event_id=6,
        retry_state=RetryState.RETRY_POLICY_NOT_SET,
    )


def test_tree() -> None:
    assert TemporalError is DurableError
    for cls in (
        ApplicationError,
        CancelledError,
        TerminatedError,
        TimeoutError,
        ServerError,
        ActivityError,
        ChildWorkflowError,
        WorkflowAlreadyStartedError,
    ):
        assert issubclass(cls, FailureError)
    assert issubclass(FailureError, DurableError)
    others: tuple[type[Exception], ...] = (
        WorkflowFailureError,
        NondeterminismError,
        WorkflowNotFoundError,
        StoreError,
        SchemaVersionError,
    )
    for other in others:
        assert issubclass(other, DurableError)
        assert not issubclass(other, FailureError)
    assert issubclass(InvalidArgumentError, ValueError)
    assert issubclass(PayloadSizeError, InvalidArgumentError)
    assert issubclass(DatabaseURLError, InvalidArgumentError)
    # Our TimeoutError and CancelledError shadow the builtins/asyncio ones on purpose.
    assert not issubclass(TimeoutError, builtins.TimeoutError)
    assert not issubclass(CancelledError, asyncio.CancelledError)


def test_every_public_name_documented() -> None:
    assert exc_module.__doc__ and "DurableError" in exc_module.__doc__
    for name in exc_module.__all__:
        assert getattr(exc_module, name).__doc__, name


def _drawn_tree() -> dict[str, str | None]:
    """The exception tree in the module docstring: each class name -> its drawn parent."""
    doc = exc_module.__doc__ or ""
    block = doc.split("```")[1]
    parents: dict[str, str | None] = {}
    path: list[str] = []  # the names on the way down to the current line
    for line in block.strip("\n").splitlines():
        if not path:
            name = line.split()[0]
            parents[name] = None
            path = [name]
            continue
        drawn = re.match(r"((?:[│ ]   )*)[├└]── (\w+)", line)
        if drawn is None:
            assert re.fullmatch(r"[│ ]*\s.*", line), f"not part of the tree: {line!r}"
            continue  # a description's second line
        depth = len(drawn.group(1)) // 4 + 1
        name = drawn.group(2)
        del path[depth:]
        parents[name] = path[-1]
        path.append(name)
    return parents


def _modules_a_caller_meets() -> list[ModuleType]:
    """``engine``, its public modules, and the store's modules (whose errors reach callers
    through the client)."""
    store = importlib.import_module("engine._store")
    names = ["engine", "engine._store"]
    names += [f"engine.{m.name}" for m in pkgutil.iter_modules(engine.__path__)]
    names += [f"engine._store.{m.name}" for m in pkgutil.iter_modules(store.__path__)]
    return [
        importlib.import_module(name)
        for name in names
        if not name.startswith("engine._") or name.startswith("engine._store")
    ]


def _raised_names(module: ModuleType) -> set[str]:
    """The names ``raise X`` and ``raise X(...)`` statements of the module's source use."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(Path(module.__file__ or "").read_text())):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name):
                names.add(target.id)
    return names


def _public_exception_classes() -> dict[str, type[BaseException]]:
    """The engine's exception classes a caller can meet, by where: what those modules
    export (``__all__``), define, or raise. Private names (``_NotInWorkflowError``) are
    left out: callers catch those as their builtin base."""
    found: dict[str, type[BaseException]] = {}
    for module in _modules_a_caller_meets():
        names = set(getattr(module, "__all__", ())) | _raised_names(module)
        names |= {
            n for n, v in vars(module).items() if getattr(v, "__module__", "") == module.__name__
        }
        for name in names:
            value = getattr(module, name, None)
            if (
                not name.startswith("_")
                and inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith("engine")
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


#: Public exception classes that are not part of the tree, and why.
_OUTSIDE_THE_TREE = {
    # Control flow, a BaseException so workflow code cannot swallow it (as temporalio's).
    "engine.workflow.ContinueAsNewError",
    # The CLI's usage errors: main() prints them and exits 2; they never reach a caller.
    "engine.cli.CommandError",
    # Warnings (RuntimeWarning, as temporalio's), given to warnings.warn, never raised.
    "engine.workflow.UnfinishedSignalHandlersWarning",
    "engine.workflow.UnfinishedUpdateHandlersWarning",
}


def test_every_exception_class_is_exported_and_drawn_under_its_base() -> None:
    defined = {
        name: value
        for name, value in vars(exc_module).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == exc_module.__name__
        and value.__name__ == name  # not the TemporalError alias
    }
    assert "DurableError" in defined and len(defined) > 20
    tree = _drawn_tree()
    for name, cls in defined.items():
        assert name in exc_module.__all__, f"{name} is missing from __all__"
        assert name in tree, f"{name} is missing from the docstring's tree"
        parent = tree[name]
        if parent is None:
            assert cls is DurableError
        else:
            assert defined[parent] in cls.__bases__, f"{name} is drawn under {parent}"
    assert set(tree) == set(defined), "the tree draws a class that does not exist"


def test_every_public_exception_of_the_engine_is_in_the_tree() -> None:
    found = _public_exception_classes()
    assert "engine.client.WorkflowUpdateFailedError" in found  # the scan sees re-exports
    for where, cls in found.items():
        if where in _OUTSIDE_THE_TREE:
            continue
        assert cls.__module__ == exc_module.__name__, f"{where} is not in engine.exceptions"
        assert cls.__name__ in exc_module.__all__, where
    assert set(found) >= _OUTSIDE_THE_TREE, "an exception listed as outside no longer exists"


def test_application_error_str_and_fields() -> None:
    err = ApplicationError(
        "permanent failure for doomed",
        {"detail": "some detail", "code": 42},
        type="PermanentError",
        non_retryable=True,
        next_retry_delay=timedelta(seconds=3),
    )
    # As in temporalio: the type prefixes the string form, not the message.
    assert str(err) == "PermanentError: permanent failure for doomed"
    assert err.message == "permanent failure for doomed"
    assert err.details == ({"detail": "some detail", "code": 42},)
    assert err.type == "PermanentError"
    assert err.non_retryable is True
    assert err.next_retry_delay == timedelta(seconds=3)
    assert err.failure is None
    assert err.cause is None

    plain = ApplicationError("oops")
    assert str(plain) == "oops"
    assert plain.details == ()
    assert plain.type is None
    assert plain.non_retryable is False
    assert plain.next_retry_delay is None


def test_cause_property_is_dunder_cause() -> None:
    inner = ApplicationError("inner")
    try:
        raise _activity_error() from inner
    except ActivityError as err:
        assert err.cause is inner
        assert err.__cause__ is inner


def test_cancelled_terminated_timeout_server() -> None:
    assert CancelledError().message == "Cancelled"
    assert CancelledError("stop", 1, 2).details == (1, 2)
    assert TerminatedError("by operator", "x").details == ("x",)
    timeout = TimeoutError(
        "activity timed out", type=TimeoutType.HEARTBEAT, last_heartbeat_details=[{"pos": 7}]
    )
    assert timeout.type is TimeoutType.HEARTBEAT
    assert timeout.last_heartbeat_details == ({"pos": 7},)
    assert ServerError("boom", non_retryable=True).non_retryable


def test_activity_and_child_fields() -> None:
    err = _activity_error()
    assert (err.scheduled_event_id, err.started_event_id) == (5, 6)
    assert (err.identity, err.activity_type, err.activity_id) == ("23905@vm", "always_fails", "1")
    assert err.retry_state is RetryState.NON_RETRYABLE_FAILURE
    child = _child_error()
    assert (child.namespace, child.workflow_id, child.run_id) == ("default", "child-1", "run-1")
    assert (child.workflow_type, child.initiated_event_id, child.started_event_id) == (
        "Child",
        5,
        6,
    )


def test_workflow_already_started_says_what_to_do() -> None:
    err = WorkflowAlreadyStartedError("order-1", "Order", run_id="r-1")
    text = str(err)
    assert "'order-1'" in text and "r-1" in text
    # An open run: the conflict policy is what decides.
    assert "another id" in text and "id_conflict_policy" in text
    closed = str(WorkflowAlreadyStartedError("order-1", "Order", run_id="r-1", reason="closed"))
    # A closed run: the reuse policy is what decides.
    assert "another id" in closed and "id_reuse_policy" in closed and "closed" in closed
    assert (err.workflow_id, err.workflow_type, err.run_id) == ("order-1", "Order", "r-1")
    assert WorkflowAlreadyStartedError("a", "B").run_id is None


def test_workflow_failure_error_message_includes_cause_chain() -> None:
    app = ApplicationError("card declined", type="InvalidCard")
    act = _activity_error()
    act.__cause__ = app
    err = WorkflowFailureError(cause=act)
    assert err.cause is act
    assert "Activity task failed" in str(err)
    assert "InvalidCard: card declined" in str(err)
    assert (
        str(WorkflowFailureError(cause=CancelledError())) == "Workflow execution failed: Cancelled"
    )


def test_nondeterminism_error_names_where() -> None:
    err = NondeterminismError(
        "timer started where an activity was scheduled",
        event_id=5,
        recorded="ActivityTaskScheduled(charge)",
        produced="StartTimer(10s)",
        workflow_id="order-1",
        run_id="run-9",
    )
    text = str(err)
    for part in (
        "event 5",
        "'order-1'",
        "run-9",
        "ActivityTaskScheduled(charge)",
        "StartTimer(10s)",
    ):
        assert part in text
    assert err.message == "timer started where an activity was scheduled"
    assert (err.event_id, err.workflow_id, err.run_id) == (5, "order-1", "run-9")
    assert str(NondeterminismError("plain")) == "plain"


def test_workflow_not_found() -> None:
    err = WorkflowNotFoundError("missing", "run-1")
    assert "'missing'" in str(err) and "run-1" in str(err)
    assert (err.workflow_id, err.run_id) == ("missing", "run-1")
    assert WorkflowNotFoundError("missing").run_id is None


def test_invalid_argument_caught_as_value_error() -> None:
    with pytest.raises(ValueError, match="too big"):
        raise PayloadSizeError("too big")


def test_enum_values_match_temporalio() -> None:
    assert [(m.name, m.value) for m in TimeoutType] == [
        ("START_TO_CLOSE", 1),
        ("SCHEDULE_TO_START", 2),
        ("SCHEDULE_TO_CLOSE", 3),
        ("HEARTBEAT", 4),
    ]
    assert [(m.name, m.value) for m in RetryState] == [
        ("UNSPECIFIED", 0),
        ("IN_PROGRESS", 1),
        ("NON_RETRYABLE_FAILURE", 2),
        ("TIMEOUT", 3),
        ("MAXIMUM_ATTEMPTS_REACHED", 4),
        ("RETRY_POLICY_NOT_SET", 5),
        ("INTERNAL_SERVER_ERROR", 6),
        ("CANCEL_REQUESTED", 7),
    ]


def test_is_cancelled_exception() -> None:
    assert is_cancelled_exception(asyncio.CancelledError())
    assert is_cancelled_exception(CancelledError())
    act = _activity_error(RetryState.CANCEL_REQUESTED)
    act.__cause__ = CancelledError()
    assert is_cancelled_exception(act)
    child = _child_error()
    child.__cause__ = CancelledError()
    assert is_cancelled_exception(child)
    failed = _activity_error()
    failed.__cause__ = ApplicationError("no")
    assert not is_cancelled_exception(failed)
    assert not is_cancelled_exception(_activity_error())
    assert not is_cancelled_exception(ValueError())
    assert not is_cancelled_exception(ApplicationError("Cancelled"))


def test_application_error_category() -> None:
    assert [(m.name, m.value) for m in ApplicationErrorCategory] == [
        ("UNSPECIFIED", 0),
        ("BENIGN", 1),
    ]
    assert ApplicationError("oops").category is ApplicationErrorCategory.UNSPECIFIED
    benign = ApplicationError("not yet", type="NotReady", category=ApplicationErrorCategory.BENIGN)
    assert benign.category is ApplicationErrorCategory.BENIGN
    assert str(benign) == "NotReady: not yet"


def test_query_reject_condition_values() -> None:
    assert [(m.name, m.value) for m in QueryRejectCondition] == [
        ("NONE", 1),
        ("NOT_OPEN", 2),
        ("NOT_COMPLETED_CLEANLY", 3),
    ]


def test_enums_and_signatures_match_temporalio() -> None:
    import temporalio.client
    import temporalio.common
    import temporalio.exceptions

    for ours, theirs in (
        (ApplicationErrorCategory, temporalio.exceptions.ApplicationErrorCategory),
        (QueryRejectCondition, temporalio.common.QueryRejectCondition),
    ):
        assert [(m.name, m.value) for m in ours] == [(m.name, m.value) for m in theirs]
    for our_cls, their_cls in (
        (ApplicationError, temporalio.exceptions.ApplicationError),
        (FailureError, temporalio.exceptions.FailureError),
        (WorkflowQueryRejectedError, temporalio.client.WorkflowQueryRejectedError),
        (WorkflowQueryFailedError, temporalio.client.WorkflowQueryFailedError),
    ):
        ours_params = inspect.signature(our_cls.__init__).parameters.values()
        theirs_params = inspect.signature(their_cls.__init__).parameters.values()
        assert [(p.name, p.kind, p.default) for p in ours_params] == [
            (p.name, p.kind, p.default) for p in theirs_params
        ], our_cls.__name__
    # Their WorkflowAlreadyStartedError's parameters are all ours (we add ``reason``).
    theirs_started = inspect.signature(temporalio.exceptions.WorkflowAlreadyStartedError)
    ours_started = inspect.signature(WorkflowAlreadyStartedError).parameters
    for param in theirs_started.parameters.values():
        assert ours_started[param.name].kind == param.kind, param.name
        assert ours_started[param.name].default == param.default, param.name


def test_failure_error_exc_args_and_failure_json() -> None:
    err = FailureError("the message", exc_args=("shown", 2))
    assert err.args == ("shown", 2) and err.message == "the message"
    assert FailureError("m").args == ("m",)
    assert FailureError("m").failure is None
    json_failure = {"message": "m", "serverFailureInfo": {"nonRetryable": True}}
    viewed = FailureError("m", failure=json_failure).failure
    assert isinstance(viewed, Failure)
    assert viewed.server_failure_info.non_retryable is True
    assert FailureError("m", failure=viewed).failure is viewed
    with pytest.raises(TypeError, match="Failure JSON"):
        FailureError("m", failure="message: m")  # type: ignore[arg-type]


def test_failure_error_takes_a_protobuf_failure_as_temporalio_does() -> None:
    from temporalio.api.enums.v1 import ApplicationErrorCategory as ProtoCategory
    from temporalio.api.failure.v1 import ApplicationFailureInfo
    from temporalio.api.failure.v1 import Failure as ProtoFailure

    benign = ProtoCategory.APPLICATION_ERROR_CATEGORY_BENIGN
    proto = ProtoFailure(
        message="m", application_failure_info=ApplicationFailureInfo(type="T", category=benign)
    )
    err = FailureError("m", failure=proto)  # type: ignore[arg-type]
    assert err.failure == {
        "message": "m",
        "applicationFailureInfo": {"type": "T", "category": "APPLICATION_ERROR_CATEGORY_BENIGN"},
    }
    assert err.failure is not None
    assert err.failure.application_failure_info.category is ApplicationErrorCategory.BENIGN


_FULL_FAILURE = {
    "message": "Activity task failed",
    "source": "PythonSDK",
    "stackTrace": "  File x",
    "activityFailureInfo": {
        "scheduledEventId": "5",
        "startedEventId": 6,
        "identity": "w@h",
        "activityType": {"name": "charge"},
        "activityId": "1",
        "retryState": "RETRY_STATE_NON_RETRYABLE_FAILURE",
    },
    "cause": {
        "message": "declined",
        "applicationFailureInfo": {
            "type": "InvalidCard",
            "nonRetryable": True,
            "nextRetryDelay": "1.500s",
            "category": "APPLICATION_ERROR_CATEGORY_BENIGN",
            "details": {
                "payloads": [
                    {"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "eyJhIjoxfQ=="},
                ]
            },
        },
    },
}


def test_failure_view_reads_fields_with_protobuf_names() -> None:
    failure = FailureError("m", failure=_FULL_FAILURE).failure
    assert failure is not None
    assert (failure.message, failure.source, failure.stack_trace) == (
        "Activity task failed",
        "PythonSDK",
        "  File x",
    )
    info = failure.activity_failure_info
    assert (info.scheduled_event_id, info.started_event_id) == (5, 6)  # int64: text or number
    assert (info.identity, info.activity_type.name, info.activity_id) == ("w@h", "charge", "1")
    assert info.retry_state is RetryState.NON_RETRYABLE_FAILURE
    app = failure.cause.application_failure_info
    assert (app.type, app.non_retryable) == ("InvalidCard", True)
    assert app.category is ApplicationErrorCategory.BENIGN
    assert app.next_retry_delay.ToTimedelta() == timedelta(seconds=1.5)
    assert (app.next_retry_delay.seconds, app.next_retry_delay.nanos) == (1, 500_000_000)
    [payload] = app.details.payloads
    assert payload.metadata == {"encoding": b"json/plain"} and payload.data == b'{"a":1}'
    assert engine.converter.DataConverter.default.from_payloads_json(app.details.payloads) == [
        {"a": 1}
    ]
    assert failure.WhichOneof("failure_info") == "activity_failure_info"
    assert failure.cause.WhichOneof("failure_info") == "application_failure_info"
    assert failure.HasField("cause") and failure.HasField("failure_info")
    assert failure.HasField("activity_failure_info")
    assert not failure.HasField("timeout_failure_info")
    assert app.HasField("next_retry_delay") and app.HasField("details")


def test_failure_view_gives_protobuf_defaults_for_missing_fields() -> None:
    failure = Failure({})
    assert failure and len(failure) == 0  # true even when empty, as a protobuf message is
    assert (failure.message, failure.source, failure.stack_trace) == ("", "", "")
    assert failure.cause.message == "" and failure.cause.cause.stack_trace == ""
    app = failure.application_failure_info
    assert (app.type, app.non_retryable, app.category) == ("", False, 0)
    assert app.details.payloads == [] and app.next_retry_delay.ToTimedelta() == timedelta(0)
    assert failure.timeout_failure_info.timeout_type == 0
    assert failure.timeout_failure_info.last_heartbeat_details.payloads == []
    act = failure.activity_failure_info
    assert (act.scheduled_event_id, act.retry_state, act.activity_type.name) == (0, 0, "")
    child = failure.child_workflow_execution_failure_info
    assert (child.namespace, child.workflow_execution.workflow_id, child.workflow_type.name) == (
        "",
        "",
        "",
    )
    assert child.initiated_event_id == 0 and child.retry_state == 0
    assert failure.canceled_failure_info.details.payloads == []
    assert failure.server_failure_info.non_retryable is False
    assert failure.encoded_attributes.data == b"" and failure.encoded_attributes.metadata == {}
    assert failure.WhichOneof("failure_info") is None
    assert not failure.HasField("cause") and not failure.HasField("failure_info")
    # An unknown enum value reads as 0, as protobuf reads one it does not know.
    assert (
        Failure(
            {"timeoutFailureInfo": {"timeoutType": "TIMEOUT_TYPE_NEW"}}
        ).timeout_failure_info.timeout_type
        == 0
    )


def test_failure_view_is_the_json_by_item_and_read_only() -> None:
    failure = Failure(_FULL_FAILURE)
    # Item access, ``get`` and ``in`` are the JSON itself, by JSON names.
    assert failure["stackTrace"] == "  File x"
    assert failure["cause"] is _FULL_FAILURE["cause"]
    assert failure.get("encodedAttributes") is None and "activityFailureInfo" in failure
    assert failure == _FULL_FAILURE and _FULL_FAILURE == failure  # noqa: SIM300 (both sides)
    assert failure != Failure({"message": "other"})
    assert Failure({}) != engine._failure.ApplicationFailureInfo({})  # types differ
    copied = failure.to_json()
    assert copied == _FULL_FAILURE and copied["cause"] is not _FULL_FAILURE["cause"]
    with pytest.raises(AttributeError, match="read-only"):
        failure.message = "changed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        failure.not_a_field  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(ValueError, match="does not have presence"):
        failure.HasField("message")
    with pytest.raises(ValueError, match='no "nope" field'):
        failure.HasField("nope")
    with pytest.raises(ValueError, match="scheduled_event_id"):
        _ = Failure(
            {"activityFailureInfo": {"scheduledEventId": "five"}}
        ).activity_failure_info.scheduled_event_id
    assert "Activity task failed" in repr(failure)


def test_workflow_query_rejected_error() -> None:
    err = WorkflowQueryRejectedError(WorkflowExecutionStatus.FAILED)
    assert err.status is WorkflowExecutionStatus.FAILED
    assert str(err) == "Query rejected, status: 3"  # temporalio's message, word for word
    assert isinstance(err, DurableError) and not isinstance(err, FailureError)
    assert WorkflowQueryRejectedError(None).status is None


def test_workflow_query_failed_error_has_message() -> None:
    err = WorkflowQueryFailedError("no handler for query 'x'")
    assert err.message == str(err) == "no handler for query 'x'"


def test_temporalio_attribute_names_of_client_errors() -> None:
    assert WorkflowContinuedAsNewError("run-2").new_execution_run_id == "run-2"
    started = WorkflowAlreadyStartedError("w", "W", run_id="r2", first_run_id="r1")
    assert (started.run_id, started.first_run_id) == ("r2", "r1")
    assert WorkflowAlreadyStartedError("w", "W").first_run_id is None
