"""Temporal's keyword parameters, here: for every function of ``test_api_parity.HERE``, every
public method of its classes, and the constructor of each class users construct themselves,
each parameter ``temporalio`` 1.35 lets a caller pass by keyword exists in ours under the
same name, or is listed below (to build, or left out on purpose, with why). The public
fields of ``temporalio``'s dataclasses there (``WorkflowExecution``...) are checked alike.

A parameter counts as ours when it is named in our signature, when our ``**kwargs`` forward
to a function that has it (:data:`FORWARDED_KWARGS`), or when our ``**kwargs`` are
documented to take it (the docstring names it as ````name````). The lists are checked the
other way too: each listed parameter is ``temporalio``'s and not ours, so they shrink as the
work lands (remove the entry when it is built).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from tests.interop.test_api_parity import HERE

_BY_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _each(names: Iterable[str], params: Iterable[str]) -> set[str]:
    """``module.Name.param`` keys for each of ``names`` with each of ``params``."""
    params = list(params)
    return {f"{name}.{param}" for name in names for param in params}


#: Classes only the engine makes (their ``__init__`` is not users' API; their methods are
#: checked): reason -> our names.
ENGINE_CONSTRUCTED: dict[str, set[str]] = {
    "made by Client.connect() (temporalio's takes a gRPC service client)": {"engine.client.Client"},
    "made by the client (start_workflow, get_workflow_handle, list_workflows, describe)": {
        "engine.client.WorkflowHandle",
        "engine.client.WorkflowExecution",
        "engine.client.WorkflowExecutionDescription",
        "engine.client.WorkflowExecutionAsyncIterator",
        "engine.client.AsyncActivityHandle",
        "engine.client.WorkflowUpdateHandle",
    },
    "a namespace of functions, never instantiated": {"engine.workflow.unsafe"},
    "made by list_schedules": {"engine.client.ScheduleAsyncIterator"},
}

#: Our functions whose ``**kwargs`` are passed on to another (its parameters count).
FORWARDED_KWARGS: dict[str, str] = {
    "engine.client.Client.execute_workflow": "engine.client.Client.start_workflow",
    **{
        f"engine.workflow.{name}": "engine.workflow.start_activity"
        for name in (
            "start_activity_class",
            "start_activity_method",
            "execute_activity_class",
            "execute_activity_method",
        )
    },
    **{
        f"engine.workflow.{name}": "engine.workflow.start_local_activity"
        for name in (
            "execute_local_activity",
            "start_local_activity_class",
            "start_local_activity_method",
            "execute_local_activity_class",
            "execute_local_activity_method",
        )
    },
}

_START = ["engine.client.Client.start_workflow", "engine.client.Client.execute_workflow"]
_ACTIVITY_STARTS = [
    f"engine.workflow.{n}"
    for n in (
        "start_activity",
        "execute_activity",
        "start_activity_class",
        "start_activity_method",
        "execute_activity_class",
        "execute_activity_method",
    )
]
_LOCAL_STARTS = [
    f"engine.workflow.{n}"
    for n in (
        "start_local_activity",
        "execute_local_activity",
        "start_local_activity_class",
        "start_local_activity_method",
        "execute_local_activity_class",
        "execute_local_activity_method",
    )
]
_CHILD_STARTS = ["engine.workflow.start_child_workflow", "engine.workflow.execute_child_workflow"]
_ENVIRONMENTS = [
    "engine.testing.WorkflowEnvironment.start_local",
    "engine.testing.WorkflowEnvironment.start_time_skipping",
]

#: In temporalio, not built here yet: reason -> ``module.Name.param`` keys.
TO_BUILD_PARAMETERS: dict[str, set[str]] = {}

#: In temporalio, left out here on purpose: reason -> ``module.Name.param`` keys.
DELIBERATELY_ABSENT_PARAMETERS: dict[str, set[str]] = {
    "protobuf messages (no gRPC here): a schedule action from a raw NewWorkflowExecutionInfo": {
        "engine.client.ScheduleActionStartWorkflow.raw_info",
    },
    "priority and fairness of task queues not built": {
        *_each(_START, ["priority"]),
        *_each(_ACTIVITY_STARTS, ["priority"]),
        *_each(_CHILD_STARTS, ["priority"]),
        "engine.client.WithStartWorkflowOperation.priority",
    },
    "worker versioning (build ids, deployments, versioning behaviours) not built": {
        *_each(_START, ["versioning_override"]),
        *_each(_CHILD_STARTS, ["versioning_intent", "versioning_override"]),
        *_each(_ACTIVITY_STARTS, ["versioning_intent"]),
        "engine.workflow.continue_as_new.versioning_intent",
        "engine.workflow.continue_as_new.initial_versioning_behavior",
        "engine.workflow.defn.versioning_behavior",
        "engine.client.WithStartWorkflowOperation.versioning_override",
        *_each(
            ["engine.worker.Worker"], ["build_id", "use_worker_versioning", "deployment_config"]
        ),
        "engine.worker.Replayer.build_id",
    },
    "event groups (new in temporalio 1.35) not built": {
        *_each(_ACTIVITY_STARTS, ["event_groups"]),
        *_each(_LOCAL_STARTS, ["event_groups"]),
        *_each(_CHILD_STARTS, ["event_groups"]),
        *_each(
            [
                f"engine.workflow.{n}"
                for n in (
                    "continue_as_new",
                    "deprecate_patch",
                    "patched",
                    "sleep",
                    "upsert_memo",
                    "upsert_search_attributes",
                    "wait_condition",
                )
            ],
            ["event_groups"],
        ),
        *_each(
            ["engine.workflow.ExternalWorkflowHandle.signal"],
            ["event_groups"],
        ),
        "engine.workflow.ExternalWorkflowHandle.cancel.event_groups",
    },
    "stack_level: the stack level of temporalio's deprecation warnings for start options": {
        "engine.client.Client.start_workflow.stack_level",
        "engine.client.WithStartWorkflowOperation.stack_level",
    },
    "no server connection (the engine opens a database URL): gRPC connection options": {
        *_each(
            ["engine.client.Client.connect"],
            [
                "api_key",
                "connect_timeout",
                "dns_load_balancing_config",
                "grpc_compression",
                "http_connect_proxy_config",
                "keep_alive_config",
                "lazy",
                "runtime",
                "tls",
            ],
        ),
        *_each(_ENVIRONMENTS, ["retry_config", "runtime"]),
        "engine.testing.WorkflowEnvironment.start_local.tls",
    },
    "the first argument of Client.connect is a database URL, named target_url": {
        "engine.client.Client.connect.target_host"
    },
    "temporalio's interceptor and plugin chains and header codecs have no counterpart": {
        *_each(
            ["engine.client.Client.connect"],
            ["interceptors", "plugins", "header_codec_behavior"],
        ),
        *_each(_ENVIRONMENTS, ["interceptors", "plugins"]),
        *_each(["engine.worker.Worker"], ["plugins", "plugin_shutdown_timeout"]),
        *_each(["engine.worker.Replayer"], ["plugins", "header_codec_behavior"]),
    },
    "Temporal's Rust core runtime (telemetry, threads) has no counterpart": {
        "engine.worker.Replayer.runtime"
    },
    "no dev server or test server is downloaded or started: the environment is a database": {
        *_each(
            ["engine.testing.WorkflowEnvironment.start_local"],
            [
                "dev_server_database_filename",
                "dev_server_download_ttl",
                "dev_server_download_version",
                "dev_server_existing_path",
                "dev_server_extra_args",
                "dev_server_log_format",
                "dev_server_log_level",
                "dev_server_startup_timeout",
                "download_dest_dir",
                "ip",
                "port",
                "ui",
                "ui_port",
            ],
        ),
        *_each(
            ["engine.testing.WorkflowEnvironment.start_time_skipping"],
            [
                "download_dest_dir",
                "port",
                "test_server_download_ttl",
                "test_server_download_version",
                "test_server_existing_path",
                "test_server_extra_args",
                "test_server_startup_timeout",
            ],
        ),
    },
    "Nexus operations: not in this engine's scope": _each(
        ["engine.worker.Worker"],
        [
            "nexus_service_handlers",
            "nexus_task_executor",
            "max_concurrent_nexus_tasks",
            "nexus_task_poller_behavior",
        ],
    ),
    "poller tuning has no meaning on a database queue (one poll loop, max_concurrent_*)": _each(
        ["engine.worker.Worker"],
        [
            "max_concurrent_workflow_task_polls",
            "max_concurrent_activity_task_polls",
            "nonsticky_to_sticky_poll_ratio",
            "workflow_task_poller_behavior",
            "activity_task_poller_behavior",
            "sticky_queue_schedule_to_start_timeout",
            "tuner",
            "max_eager_activity_reservations_per_workflow_task",
        ],
    ),
    "rate limits of activities not built": _each(
        ["engine.worker.Worker"],
        ["max_activities_per_second", "max_task_queue_activities_per_second"],
    ),
    "heartbeats are throttled by the heartbeat timeout (80%), not by these intervals": _each(
        ["engine.worker.Worker"],
        ["max_heartbeat_throttle_interval", "default_heartbeat_throttle_interval"],
    ),
    "workflow code runs on the worker's own thread and event loop, evicted by the engine": _each(
        ["engine.worker.Worker", "engine.worker.Replayer"],
        ["workflow_task_executor", "disable_safe_workflow_eviction"],
    ),
    "temporalio's sandbox state across processes (SharedStateManager is not here either)": {
        "engine.worker.Worker.shared_state_manager"
    },
    "payload error limits always apply (Temporal server's limits, checked before writing)": {
        "engine.worker.Worker.disable_payload_error_limit"
    },
    "external payload storage (new in temporalio 1.35) not built": {
        "engine.worker.Worker.max_workflow_task_external_storage_concurrency"
    },
    "patch activation callbacks (new in temporalio 1.35) not built": {
        "engine.worker.Worker.patch_activation_callback"
    },
    "no page tokens for history: the iterator pages by event id (after_event_id=)": {
        "engine.client.WorkflowHandle.fetch_history_events.next_page_token"
    },
    "fields: visibility's raw protobuf (no gRPC here)": {
        *_each(
            ["engine.client.WorkflowExecution", "engine.client.WorkflowExecutionDescription"],
            ["raw_info"],
        ),
        "engine.client.WorkflowExecutionDescription.raw_description",
    },
}


def _engine_constructed() -> set[str]:
    return set().union(*ENGINE_CONSTRUCTED.values())


def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without one
        return None


def _lookup(qualified: str) -> Any:
    module, _, rest = qualified.partition(".")
    for split in range(qualified.count("."), 0, -1):
        module, *attrs = qualified.rsplit(".", split)
        try:
            obj: Any = importlib.import_module(module)
        except ImportError:
            continue
        for attr in attrs:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(rest)


def _callables() -> Iterator[tuple[str, Callable[..., Any], Callable[..., Any]]]:
    """(our qualified name, theirs, ours) for each function, method and constructor to
    compare: a constructor's name is the class's."""
    skip_init = _engine_constructed()
    for (theirs_module, ours_module), names in sorted(HERE.items()):
        theirs_mod = importlib.import_module(theirs_module)
        ours_mod = importlib.import_module(ours_module)
        for name in sorted(names):
            theirs, ours = getattr(theirs_mod, name), getattr(ours_mod, name)
            qualified = f"{ours_module}.{name}"
            if not inspect.isclass(theirs):
                if callable(theirs) and callable(ours):
                    yield qualified, theirs, ours
                continue
            seen: set[str] = set()
            for klass in theirs.__mro__:
                if not klass.__module__.startswith("temporalio"):
                    continue
                for attr, value in vars(klass).items():
                    if attr in seen or (attr.startswith("_") and attr != "__init__"):
                        continue
                    seen.add(attr)
                    if isinstance(value, property) or not callable(getattr(theirs, attr)):
                        continue
                    if inspect.isclass(getattr(theirs, attr)):
                        continue
                    if attr == "__init__":
                        if qualified not in skip_init:
                            yield qualified, theirs.__init__, ours.__init__
                    elif hasattr(ours, attr):  # a missing method is a name, not a parameter
                        yield f"{qualified}.{attr}", getattr(theirs, attr), getattr(ours, attr)


def _keyword_params(fn: Any) -> set[str]:
    sig = _signature(fn)
    if sig is None:
        return set()
    return {p.name for p in sig.parameters.values() if p.kind in _BY_KEYWORD}


def _accepts(qualified: str, fn: Any, param: str) -> bool:
    """Whether ours takes ``param`` by keyword: named, forwarded, or documented kwargs."""
    sig = _signature(fn)
    if sig is None:
        return False
    if param in _keyword_params(fn):
        return True
    if not any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        return False
    if qualified in FORWARDED_KWARGS:
        target = FORWARDED_KWARGS[qualified]
        return _accepts(target, _lookup(target), param)
    return f"``{param}``" in (inspect.getdoc(fn) or "")


def _listed() -> dict[str, str]:
    """Every listed key -> its reason (a key is in one list only)."""
    keys: dict[str, str] = {}
    for table in (TO_BUILD_PARAMETERS, DELIBERATELY_ABSENT_PARAMETERS):
        for reason, group in table.items():
            for key in group:
                assert key not in keys, f"{key} is listed twice"
                keys[key] = reason
    return keys


def _dataclasses() -> Iterator[tuple[str, set[str], type]]:
    """(our qualified name, temporalio's public fields, our class) for each dataclass of
    ``HERE``: what the engine returns (``WorkflowExecution``...) is read by its fields."""
    for (theirs_module, ours_module), names in sorted(HERE.items()):
        for name in sorted(names):
            theirs = getattr(importlib.import_module(theirs_module), name)
            if isinstance(theirs, type) and dataclasses.is_dataclass(theirs):
                fields = {f.name for f in dataclasses.fields(theirs) if not f.name.startswith("_")}
                ours = getattr(importlib.import_module(ours_module), name)
                yield f"{ours_module}.{name}", fields, ours


def _has_field(ours: type, name: str) -> bool:
    if dataclasses.is_dataclass(ours) and name in {f.name for f in dataclasses.fields(ours)}:
        return True
    return hasattr(ours, name)


_CALLABLES = list(_callables())
_DATACLASSES = list(_dataclasses())


@pytest.mark.parametrize(
    ("qualified", "theirs", "ours"), _CALLABLES, ids=[c[0] for c in _CALLABLES]
)
def test_keyword_parameters_are_here(qualified: str, theirs: Any, ours: Any) -> None:
    listed = _listed()
    missing = sorted(
        param
        for param in _keyword_params(theirs)
        if not _accepts(qualified, ours, param) and f"{qualified}.{param}" not in listed
    )
    assert not missing, (
        f"{qualified} lacks temporalio's keyword parameters {missing}: build them, or list "
        "them in TO_BUILD_PARAMETERS / DELIBERATELY_ABSENT_PARAMETERS with the reason"
    )


@pytest.mark.parametrize(
    ("qualified", "fields", "ours"), _DATACLASSES, ids=[d[0] for d in _DATACLASSES]
)
def test_dataclass_fields_are_here(qualified: str, fields: set[str], ours: type) -> None:
    listed = _listed()
    missing = sorted(
        f for f in fields if not _has_field(ours, f) and f"{qualified}.{f}" not in listed
    )
    assert not missing, f"{qualified} lacks temporalio's fields {missing}: build or list them"


@pytest.mark.parametrize("key", sorted(_listed()))
def test_listed_parameters_are_theirs_and_not_ours(key: str) -> None:
    qualified, _, param = key.rpartition(".")
    compared = {name: (theirs, ours) for name, theirs, ours in _CALLABLES}
    records = {name: (fields, ours) for name, fields, ours in _DATACLASSES}
    if qualified in records and param in records[qualified][0]:  # a field
        assert not _has_field(records[qualified][1], param), (
            f"{key} is built now: remove it from the list ({_listed()[key]!r})"
        )
        return
    assert qualified in compared, f"{qualified} is not compared (fix the list)"
    theirs, ours = compared[qualified]
    assert param in _keyword_params(theirs), f"{param} is not temporalio's {qualified}"
    assert not _accepts(qualified, ours, param), (
        f"{key} is built now: remove it from the list ({_listed()[key]!r})"
    )


def test_engine_constructed_classes_are_compared_names() -> None:
    here = {f"{ours}.{name}" for (_, ours), names in HERE.items() for name in names}
    assert _engine_constructed() <= here
    for target in FORWARDED_KWARGS.values():
        assert callable(_lookup(target))
