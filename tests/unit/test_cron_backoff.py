"""A cron run's wait before its first workflow task, as Temporal's server computes it
(``GetBackoffForNextSchedule``): from the previous run's scheduled time, skipping times
missed while that run was still going, rounded up to whole seconds."""

from __future__ import annotations

from engine._model.cron import cron_backoff

# Seconds into a minute, from a run on Temporal's dev server (``@every 2s``, each run
# sleeping 1.5 s): the runs started at 29.62, 33.186 and 36.747 waited 2 s, 2 s and 1 s.
T0 = 1_795_999_800.0  # 2026-11-30 00:50:00 UTC, on a 10-minute boundary


def test_every_as_on_temporal_s_dev_server() -> None:
    assert cron_backoff("@every 2s", T0 + 29.62, T0 + 29.62) == 2.0  # the first run
    # Scheduled at 31.62: its next time (33.0) had passed at the close (33.186), so 35.0.
    assert cron_backoff("@every 2s", T0 + 31.62, T0 + 33.186) == 2.0
    # Scheduled at 35.186: next 37.0, 0.253 s after the close, rounded up to 1 s.
    assert cron_backoff("@every 2s", T0 + 35.186, T0 + 36.747) == 1.0


def test_cron_expressions_skip_the_times_a_long_run_missed() -> None:
    # Every 10 minutes; the run scheduled at :00 closed at :25.5: :10 and :20 are skipped.
    assert cron_backoff("*/10 * * * *", T0, T0 + 25 * 60 + 0.5) == 5 * 60  # 299.5 s, up
    # A close exactly on a schedule time does not wait a whole interval.
    assert cron_backoff("*/10 * * * *", T0, T0 + 10 * 60) == 0.0


def test_a_run_closed_before_its_scheduled_time_waits_for_it() -> None:
    assert cron_backoff("@hourly", T0 + 3600, T0 + 10.2) == 3590.0
