"""``@activity.defn`` on functions, methods and callable classes, as temporalio allows."""

from __future__ import annotations

import dataclasses

import pytest

from engine import activity
from engine._model.definitions import ActivityDefinition
from engine.exceptions import InvalidArgumentError


@dataclasses.dataclass
class Order:
    sku: str
    quantity: int


class Inventory:
    def __init__(self) -> None:
        self.reserved: list[Order] = []

    @activity.defn
    async def reserve(self, order: Order) -> int:
        self.reserved.append(order)
        return len(self.reserved)

    @activity.defn(name="release_stock")
    def release(self, order: Order) -> None:
        self.reserved.remove(order)


@activity.defn
class Pricer:
    def __init__(self, rate: float) -> None:
        self.rate = rate

    async def __call__(self, order: Order) -> float:
        return order.quantity * self.rate


def test_a_bound_method_is_called_on_its_instance_with_self_left_out() -> None:
    stock = Inventory()
    defn = ActivityDefinition.of(stock.reserve)
    assert defn.name == "reserve" and defn.is_async
    assert defn.fn == stock.reserve  # the bound method: the worker calls it on `stock`
    assert defn.arg_types == [Order] and defn.return_type is int
    sync = ActivityDefinition.of(stock.release)
    assert sync.name == "release_stock" and not sync.is_async and sync.arg_types == [Order]
    # The unbound function names the activity in workflow code (execute_activity_method).
    assert ActivityDefinition.of(Inventory.reserve).name == "reserve"


def test_a_callable_class_is_named_by_the_class_and_called_through_its_instances() -> None:
    assert ActivityDefinition.of(Pricer).name == "Pricer"
    assert ActivityDefinition.of(Pricer).return_type is float
    pricer = Pricer(2.5)
    defn = ActivityDefinition.of(pricer)
    assert defn.fn is pricer and defn.is_async
    assert defn.arg_types == [Order] and defn.return_type is float


def test_bad_activity_definitions_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="keyword-only parameter 'fast'"):

        @activity.defn
        async def ship(order: Order, *, fast: bool) -> None: ...

    async def twice(x: int) -> int:
        return x

    activity.defn(twice)
    with pytest.raises(InvalidArgumentError, match="twice"):
        activity.defn(twice)
    with pytest.raises(InvalidArgumentError, match="not an activity"):
        ActivityDefinition.of(lambda: None)


def test_no_thread_cancel_exception_is_kept_on_the_definition() -> None:
    @activity.defn(no_thread_cancel_exception=True)
    def polls(n: int) -> int:
        return n

    assert ActivityDefinition.of(polls).no_thread_cancel_exception
