"""Schedule specs against Temporal's own answers: the next action times (and the refusals)
that ``temporal server start-dev`` gave for the same specs, recorded in
``data/schedule_spec_dev_server.json``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from engine._model.schedule_spec import (
    Calendar,
    Interval,
    Range,
    ScheduleSpecError,
    calendar_from_cron,
    compile_spec,
)

RECORDED = json.loads(
    (Path(__file__).parent / "data" / "schedule_spec_dev_server.json").read_text()
)
#: case -> (the time it was recorded at, what the dev server said)
CASES = {
    name: (datetime.fromisoformat(rec["recorded_at"]).timestamp(), said)
    for rec in RECORDED["recordings"]
    for name, said in rec["cases"].items()
}
AFTER = CASES["cron_daily"][0]
H, D = 3600.0, 86400.0


def _at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


SPECS = {
    "every_90m_offset_10m": dict(intervals=[Interval(90 * 60, 10 * 60)]),
    "cron_weekdays_930": dict(cron_expressions=["30 9 * * MON-FRI"]),
    "cron_every_15s": dict(cron_expressions=["@every 15s"]),
    "cron_daily": dict(cron_expressions=["@daily"]),
    "cron_tz_ny_0230": dict(cron_expressions=["CRON_TZ=America/New_York 30 2 * * *"]),
    "cal_dst_ny_0230": dict(
        calendars=[Calendar(hour=(Range(2),), minute=(Range(30),))],
        time_zone_name="America/New_York",
    ),
    "cal_dst_ny_0130": dict(
        calendars=[Calendar(hour=(Range(1),), minute=(Range(30),))],
        time_zone_name="America/New_York",
    ),
    "cal_31st": dict(calendars=[Calendar(day_of_month=(Range(31),), hour=(Range(12),))]),
    "cal_step": dict(calendars=[Calendar(minute=(Range(0, 59, 20),), hour=(Range(8, 10),))]),
    "cron_6_fields": dict(cron_expressions=["0 30 9 * * *"]),
    "cron_7_fields": dict(cron_expressions=["0 30 9 1 1 * 2030"]),
    "end_at": dict(intervals=[Interval(D)], end_at=_at("2027-03-05T00:00:00+00:00")),
    "skip": dict(
        calendars=[Calendar(hour=(Range(12),))],
        skip=[Calendar(day_of_week=(Range(0), Range(6)), hour=(Range(12),))],
    ),
    "jitter": dict(intervals=[Interval(H)], jitter=600.0),
    "bad_cron": dict(cron_expressions=["61 * * * *"]),
    "bad_tz": dict(intervals=[Interval(H)], time_zone_name="Mars/Olympus"),
    "zero_interval": dict(intervals=[Interval(0)]),
    # Daylight saving in New York, 2027: 02:00 -> 03:00 on 14 March, 02:00 -> 01:00 on
    # 7 November. A wall time the change skips has no action that day; one it repeats
    # has two.
    "ny_0230_spring": dict(
        calendars=[Calendar(hour=(Range(2),), minute=(Range(30),))],
        time_zone_name="America/New_York",
        start_at=_at("2027-03-12T12:00:00+00:00"),
    ),
    "ny_0130_fall": dict(
        calendars=[Calendar(hour=(Range(1),), minute=(Range(30),))],
        time_zone_name="America/New_York",
        start_at=_at("2027-11-06T12:00:00+00:00"),
    ),
    "ny_every_30m_fall": dict(
        calendars=[Calendar(hour=(Range(0, 3),), minute=(Range(0, 59, 30),))],
        time_zone_name="America/New_York",
        start_at=_at("2027-11-07T03:00:00+00:00"),
    ),
    "ny_every_30m_spring": dict(
        calendars=[Calendar(hour=(Range(1, 3),), minute=(Range(0, 59, 30),))],
        time_zone_name="America/New_York",
        start_at=_at("2027-03-14T05:00:00+00:00"),
    ),
    "dom_and_dow": dict(cron_expressions=["0 12 13 * FRI"]),  # both must hold: Fri 13th
    "cron_question": dict(cron_expressions=["0 12 ? * MON"]),
    "cron_dow7": dict(cron_expressions=["0 12 * * 7"]),
    "cal_bad_dow": dict(calendars=[Calendar(day_of_week=(Range(7, 7),))]),
    "cal_bad_second": dict(calendars=[Calendar(second=(Range(60, 60),))]),
    "cal_bad_dom": dict(calendars=[Calendar(day_of_month=(Range(0),))]),
    "cal_bad_month": dict(calendars=[Calendar(month=(Range(13, 13),))]),
    "cron_L": dict(cron_expressions=["0 12 L * *"]),
    "every_offset": dict(cron_expressions=["@every 1h/15m"]),
    "offset_too_big": dict(intervals=[Interval(H, 2 * H)]),
    "end_before_start": dict(
        intervals=[Interval(H)],
        start_at=_at("2027-01-02T00:00:00+00:00"),
        end_at=_at("2027-01-01T00:00:00+00:00"),
    ),
}


def test_every_recorded_case_has_its_spec() -> None:
    assert set(SPECS) == set(CASES)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_next_times_are_temporal_s(name: str) -> None:
    after, expected = CASES[name]
    if "error" in expected:
        with pytest.raises(ScheduleSpecError) as err:
            compile_spec(**SPECS[name])
        assert str(err.value) == expected["error"]
        return
    spec = compile_spec(**SPECS[name])
    recorded = [_at(t) for t in expected["next"]]
    if name == "jitter":
        # Temporal's jitter comes from its own hash; ours is deterministic too: each time
        # is its nominal hour plus less than the 10 minutes of jitter.
        actions = []
        t = after
        for _ in recorded:
            nominal, actual = spec.next_action(t, "jitter") or (0.0, 0.0)
            actions.append((nominal, actual))
            t = nominal
        for (nominal, actual), theirs in zip(actions, recorded, strict=True):
            assert nominal <= actual < nominal + 600
            assert nominal <= theirs < nominal + 600
        assert actions == [spec.next_action(a[0] - 1, "jitter") for a in actions]
        return
    assert spec.times(after, len(recorded)) == recorded


def test_cron_strings_become_calendars_as_on_temporal() -> None:
    zone, cal, iv = calendar_from_cron("CRON_TZ=Europe/Paris */20 8-10 * JAN-MAR 1-5")
    assert zone == "Europe/Paris" and iv is None and cal is not None
    assert cal.minute == (Range(0, 0), Range(20, 20), Range(40, 40))
    assert cal.hour == (Range(8, 10),) and cal.month == (Range(1, 3),)
    assert cal.day_of_week == (Range(1, 5),) and cal.year == ()
    assert calendar_from_cron("@every 1h/15m") == (None, None, Interval(3600, 900))
    assert calendar_from_cron("0 12 * * 7")[1].day_of_week == (Range(0, 0),)  # 7 is Sunday
    for bad, said in (
        ("* * *", "has 3 fields"),
        ("0 12 1#2 * *", "DayOfMonth is not in range"),
        ("@every 5x", "invalid duration"),
    ):
        with pytest.raises(ScheduleSpecError, match=said):
            calendar_from_cron(bad)


def test_start_end_and_a_calendar_that_matches_nothing() -> None:
    daily = dict(intervals=[Interval(D)])
    start = _at("2027-01-10T00:00:00+00:00")
    spec = compile_spec(**daily, start_at=start, end_at=start + 2 * D)
    assert spec.times(AFTER, 5) == [start, start + D, start + 2 * D]
    never = compile_spec(calendars=[Calendar(day_of_month=(Range(30),), month=(Range(2),))])
    assert never.next_nominal(AFTER) is None
    assert timedelta(seconds=spec.times(AFTER, 1)[0] - AFTER) > timedelta(0)
