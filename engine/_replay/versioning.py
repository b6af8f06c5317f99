"""Patches and SDK flags of one run: what ``workflow.patched()`` records, as Temporal's SDKs
record it, and the core SDK flags a run's workflow task completions carry.

A patch used by new code (or found in the history being replayed) is recorded as a
``core_patch`` marker in plain JSON (never through the payload codec: the marker is the
SDK's data, not the workflow's), followed by an upsert of the ``TemporalChangeVersion``
search attribute listing every patch the run has used so far, while that list stays within
Temporal's 2 KiB limit on a search attribute value. Replay matches the upserts leniently (see
``driver.py``), so histories written before them replay too.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Sequence
from typing import Any

from .._model import commands as cmd

log = logging.getLogger("engine.workflow")

PATCH_MARKER = "core_patch"
#: Temporal's core SDK flags whose behaviour this engine has, recorded (as Temporal's SDKs
#: record theirs) in ``sdkMetadata.coreUsedFlags`` of the first workflow task a run
#: completes without replaying: 1, activity and child ids and types are checked on replay;
#: 2, each patch upserts TemporalChangeVersion; 3, the command that closes the run comes
#: after the task's other commands. temporalio's replayer reads a history by them (without
#: 2 it expects no upserts, without 3 it drops commands after the closing one).
SDK_FLAGS = (1, 2, 3)
#: Temporal's limit on a search attribute value: past it a patch's upsert of
#: TemporalChangeVersion is skipped (the patch itself still works), as its core SDK does.
MAX_CHANGE_VERSION_BYTES = 2048

JsonDict = dict[str, Any]


class Versioning:
    """The patch and SDK-flag state of one workflow instance."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        #: Patches the history being replayed holds, and every answer given so far.
        self._seen: set[str] = set()
        self._answers: dict[str, bool] = {}
        #: The patches this run has used, in order (the value of TemporalChangeVersion),
        #: and the size of that list as compact JSON.
        self._change_versions: list[str] = []
        self._change_version_bytes = 1
        self._change_version_full = False
        #: SDK flags to record in the next completion, and those recorded already.
        self._flags: list[int] = []
        self._flags_recorded: set[int] = set()

    def history_has_patch(self, patch_id: str) -> None:
        """The history being replayed records ``patch_id`` in this workflow task."""
        self._seen.add(patch_id)

    def patched(
        self, patch_id: str, deprecated: bool, *, replaying: bool
    ) -> tuple[bool, list[cmd.Command]]:
        """The answer to ``workflow.patched(patch_id)`` and the commands it records."""
        if patch_id in self._answers:
            return self._answers[patch_id], []
        use_new = (not replaying) or patch_id in self._seen
        commands: list[cmd.Command] = []
        if use_new:
            # "patch-data", with a hyphen: the key Temporal's SDKs read.
            marker = json_payload({"id": patch_id, "deprecated": deprecated})
            commands.append(cmd.RecordMarker(PATCH_MARKER, {"patch-data": {"payloads": [marker]}}))
            if self._add_change_version(patch_id, replaying=replaying):
                versions = json_payload(self._change_versions, search_type="KeywordList")
                commands.append(
                    cmd.UpsertWorkflowSearchAttributes({cmd.CHANGE_VERSION_ATTRIBUTE: versions})
                )
        self._answers[patch_id] = use_new
        return use_new, commands

    def _add_change_version(self, patch_id: str, *, replaying: bool) -> bool:
        """Add the patch to TemporalChangeVersion; False once the list would pass Temporal's
        size limit (it only grows: once over it, never again)."""
        if self._change_version_full:
            return False
        size = self._change_version_bytes + len(json.dumps(patch_id)) + 1
        if size > MAX_CHANGE_VERSION_BYTES:
            self._change_version_full = True
            if not replaying:
                log.warning(
                    "TemporalChangeVersion of run %s would exceed %d bytes with patch %r: "
                    "this and later patches are not upserted (as Temporal's SDKs do); the "
                    "patches work all the same",
                    self.run_id,
                    MAX_CHANGE_VERSION_BYTES,
                    patch_id,
                )
            return False
        self._change_versions.append(patch_id)
        self._change_version_bytes = size
        return True

    # -- SDK flags --------------------------------------------------------------------------

    def begin_activation(self, *, replaying: bool) -> None:
        """An activation begins: one that does not replay records every known flag the
        history does not hold yet."""
        if not replaying and not self._flags_recorded.issuperset(SDK_FLAGS):
            self._flags = [f for f in SDK_FLAGS if f not in self._flags_recorded]

    def note_recorded_flags(self, flags: Sequence[int]) -> None:
        """The history recorded these SDK flags (in a ``WorkflowTaskCompleted``)."""
        self._flags_recorded.update(int(f) for f in flags)

    def take_sdk_flags(self) -> list[int]:
        """The SDK flags to record in this activation's completion (each given once)."""
        flags, self._flags = self._flags, []
        self._flags_recorded.update(flags)
        return flags


def json_payload(value: Any, *, search_type: str | None = None) -> JsonDict:
    """A ``json/plain`` payload as Temporal's SDKs write their own (compact JSON)."""
    metadata = {"encoding": base64.b64encode(b"json/plain").decode()}
    if search_type is not None:
        metadata["type"] = base64.b64encode(search_type.encode()).decode()
    data = json.dumps(value, separators=(",", ":")).encode()
    return {"metadata": metadata, "data": base64.b64encode(data).decode()}
