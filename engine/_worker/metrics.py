"""Worker metrics, named as Temporal's SDK names them."""

from __future__ import annotations

import statistics
import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any


@dataclass
class WorkerMetrics:
    """Counters and gauges of one worker; :meth:`snapshot` gives Temporal's metric names."""

    workflow_slots_total: int = 0
    activity_slots_total: int = 0
    workflow_slots_used: int = 0
    activity_slots_used: int = 0
    sticky_cache_size: int = 0
    sticky_cache_hit: int = 0
    sticky_cache_miss: int = 0
    sticky_cache_forced_eviction: int = 0
    workflow_task_failed: Counter[str] = field(default_factory=Counter)
    workflow_tasks_completed: int = 0
    activities_completed: int = 0
    activities_failed: int = 0
    workflow_polls: int = 0
    activity_polls: int = 0
    #: New runs whose first workflow task a start in this process handed straight over.
    eager_workflow_starts: int = 0
    schedule_to_start_ms: deque[float] = field(default_factory=lambda: deque(maxlen=1000))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def snapshot(self) -> dict[str, Any]:
        """A dict keyed by Temporal's metric names (plus a few of our own)."""
        with self._lock:
            latencies = list(self.schedule_to_start_ms)
        return {
            "temporal_worker_task_slots_available": {
                "WorkflowWorker": self.workflow_slots_total - self.workflow_slots_used,
                "ActivityWorker": self.activity_slots_total - self.activity_slots_used,
            },
            "temporal_sticky_cache_size": self.sticky_cache_size,
            "temporal_sticky_cache_hit": self.sticky_cache_hit,
            "temporal_sticky_cache_miss": self.sticky_cache_miss,
            "temporal_sticky_cache_total_forced_eviction": self.sticky_cache_forced_eviction,
            "temporal_workflow_task_execution_failed": dict(self.workflow_task_failed),
            "temporal_activity_schedule_to_start_latency": {
                "count": len(latencies),
                "median_ms": statistics.median(latencies) if latencies else None,
                "max_ms": max(latencies) if latencies else None,
            },
            "workflow_tasks_completed": self.workflow_tasks_completed,
            "activities_completed": self.activities_completed,
            "activities_failed": self.activities_failed,
            "workflow_polls": self.workflow_polls,
            "activity_polls": self.activity_polls,
            "eager_workflow_starts": self.eager_workflow_starts,
        }

    def record_schedule_to_start(self, ms: float) -> None:
        """Add one schedule-to-start latency sample."""
        with self._lock:
            self.schedule_to_start_ms.append(ms)
