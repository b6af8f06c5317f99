"""The user's summaries (Temporal's ``userMetadata``) in every run view: the view model
decodes them once (``widgets.models``), the widgets show them, always as plain text."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from engine import (
    Client,
    DataConverter,
    Worker,
    WorkflowHistory,
    activity,
    workflow,
)
from tests.codecs import WrapCodec
from widgets import HistoryView, ReplayStepper, Timeline
from widgets.models import ENCODED, HistoryModel, event_row, metadata_text
from widgets.timeline_model import timeline

from ..interop.engine_code import HelloWF, SummariesWF
from .conftest import eventually

HISTORIES = Path(__file__).resolve().parents[1] / "replay" / "histories"
MARKUP = "<b>x</b>"


def golden(name: str = "user_metadata.json", *, activity_summary: str | None = None) -> Any:
    """The recorded history with summaries (ours, or ``temporal/...``: the dev server's),
    its activity's summary replaced by ``activity_summary`` when given."""
    data = json.loads((HISTORIES / name).read_text())
    if activity_summary is not None:
        for event in data["events"]:
            if event["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED":
                payload = event["userMetadata"]["summary"]
                payload["data"] = base64.b64encode(json.dumps(activity_summary).encode()).decode()
    return WorkflowHistory.from_json("user_metadata", json.dumps(data))


@pytest.mark.parametrize("name", ["user_metadata.json", "temporal/user_metadata.json"])
def test_the_model_decodes_each_summary_once_for_every_view(name: str) -> None:
    model = HistoryModel(golden(name).events)
    assert model.static_summary == "Greets **Temporal**"
    assert model.static_details == "Four greetings:\n- an activity\n- a local one\n- a child"
    rows = {r["kind"] + ":" + r["user_summary"]: r for r in model.rows("compact", 0, 100)}
    assert set(rows) == {
        "workflow:Greets **Temporal**",
        "activity:greet **them**",
        "marker:greet locally",
        "timer:a short nap",
        "timer:give up",
        "child:the child",
    }
    assert rows["child:the child"]["user_details"] == "It says hello.\n\nTwice if asked."
    assert rows["activity:greet **them**"]["summary"]  # the kernel's own line is kept
    full = {r["event_type"]: r["user_summary"] for r in model.rows("full", 0, 100)}
    assert full["ActivityTaskScheduled"] == "greet **them**"
    assert full["TimerStarted"] == "give up"  # the last of two
    assert full["ActivityTaskCompleted"] == ""  # only the event that carries it
    data = timeline(model).to_json()
    assert (data["summary"], data["details"]) == (model.static_summary, model.static_details)
    lanes = {lane["category"]: lane for lane in data["lanes"] if lane["summary"]}
    assert lanes["activity"]["summary"] == "greet **them**"
    assert lanes["child"]["details"] == "It says hello.\n\nTwice if asked."
    markers = [t for lane in data["lanes"] for t in lane["ticks"] if t["kind"] == "marker"]
    assert [t["summary"] for t in markers] == ["greet locally"]


def test_event_row_decodes_a_summary_by_itself_too() -> None:
    history = golden()
    scheduled = next(e for e in history.events if e.event_type == "ActivityTaskScheduled")
    assert event_row(scheduled, history.events[0].event_time).user_summary == "greet **them**"
    assert HistoryModel().static_summary == "" and timeline([]).summary == ""


def test_a_codec_is_applied_and_without_it_a_summary_shows_as_encoded() -> None:
    coded = DataConverter(payload_codec=WrapCodec())
    [payload] = coded.to_payloads_json(["secret plan"])
    assert metadata_text(payload, coded) == "secret plan"
    assert metadata_text(payload) == ENCODED == "(encoded)"  # the default: no codec
    assert metadata_text({"metadata": {}, "data": "!!"}) == ENCODED  # malformed: no error
    assert metadata_text(None) == ""
    [number] = DataConverter.default.to_payloads_json([42])
    assert metadata_text(number) == "42"


def test_history_view_shows_the_run_summary_and_step_summaries_as_text() -> None:
    view = HistoryView(golden(activity_summary=MARKUP))
    try:
        assert view.run_summary == "Greets **Temporal**"
        assert view.run_details.startswith("Four greetings:\n")
        [act] = [r for r in view.rows if r["kind"] == "activity"]
        assert act["user_summary"] == MARKUP
        html = view._repr_mimebundle_()[0]["text/html"]
        assert "&lt;b&gt;x&lt;/b&gt;" in html and MARKUP not in html
        assert "<em>Greets **Temporal**</em>" in html  # Markdown is not rendered
        assert "Four greetings:<br>- an activity" in html
        text = view._repr_mimebundle_()[0]["text/plain"]
        assert "Greets **Temporal**" in text and f"— {MARKUP}" in text
        view.mode = "full"
        assert MARKUP in [r["user_summary"] for r in view.rows]
    finally:
        view.close()


def test_timeline_shows_summaries_beside_bars_and_in_its_static_output() -> None:
    view = Timeline(golden(activity_summary=f"{MARKUP} costs $5 and $6"))
    try:
        assert view.data["summary"] == "Greets **Temporal**"
        [lane] = [lane for lane in view.data["lanes"] if lane["category"] == "activity"]
        assert lane["summary"] == f"{MARKUP} costs $5 and $6"
        text = view._repr_mimebundle_()[0]["text/plain"]
        assert f"say_hello — {MARKUP} costs $5 and $6" in text
        fig = view.figure()
        assert isinstance(fig, Figure)
        drawn = [t.get_text() for t in fig.axes[0].texts]
        assert f"{MARKUP} costs $5 and $6" in drawn  # "$" is no mathtext: it draws as is
        assert "Greets **Temporal**" in fig.axes[0].get_title(loc="left")
        assert view._repr_mimebundle_()[0]["image/png"]
    finally:
        view.close()


def test_the_stepper_shows_summaries_escaped() -> None:
    history = golden(activity_summary=MARKUP)
    stepper = ReplayStepper(history, [SummariesWF, HelloWF])
    try:
        stepper.goto(6)  # past the activity's scheduling
        assert "Greets **Temporal**" in stepper.header.value
        assert "&lt;b&gt;x&lt;/b&gt; · activity say_hello" in stepper.history_view.value
        html = stepper._repr_mimebundle_()[0]["text/html"]
        assert "&lt;b&gt;x&lt;/b&gt;" in html and MARKUP not in html
    finally:
        stepper.close()


@activity.defn
async def charge(card: str) -> str:
    return f"charged {card}"


@workflow.defn
class Checkout:
    @workflow.run
    async def run(self, card: str) -> str:
        await workflow.sleep(timedelta(milliseconds=5), summary="wait for <i>stock</i>")
        return await workflow.execute_activity(
            charge, card, start_to_close_timeout=timedelta(seconds=10), summary=f"charge {MARKUP}"
        )


async def test_live_views_decode_with_the_handle_s_client_converter(
    client: Client, task_queue: str, db_url: str
) -> None:
    coded = await Client.connect(db_url, data_converter=DataConverter(payload_codec=WrapCodec()))
    try:
        async with Worker(coded, task_queue=task_queue, workflows=[Checkout], activities=[charge]):
            handle = await coded.start_workflow(
                Checkout.run,
                "4242",
                id="checkout-" + uuid.uuid4().hex,
                task_queue=task_queue,
                static_summary="One <b>card</b>",
            )
            history_view = HistoryView(handle, refresh_interval=0.02)
            line = Timeline(handle, refresh_interval=0.02)
            assert await handle.result() == "charged 4242"
            await eventually(lambda: not history_view.live and not line.live, "the close")
        assert history_view.run_summary == "One <b>card</b>"
        summaries = {r["kind"]: r["user_summary"] for r in history_view.rows}
        assert summaries["activity"] == f"charge {MARKUP}"
        assert summaries["timer"] == "wait for <i>stock</i>"
        assert line.data["summary"] == "One <b>card</b>"
        # The same run through a client without the codec: encoded, and no error.
        other = HistoryView(client.get_workflow_handle(handle.id))
        assert other.run_summary == ENCODED and not other.error
        other.close()
        history_view.close()
        line.close()
    finally:
        await coded.close()
