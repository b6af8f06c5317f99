"""One decorator turns a transaction function of the service into its coroutine method.

An operation is written once, as the transaction function with the signature its callers
use plus ``tx`` after ``self``::

    @operation
    def signal_workflow(self, tx: StoreTx, namespace: str, ...) -> None:
        ...

    await service.signal_workflow(namespace, ...)  # one transaction on the store

``@operation`` runs it with ``Store.transaction`` (a change), ``@operation(read=True)`` with
``Store.read`` (reads only: on SQLite a reader connection, no write lock). The method is
made once, when the class is defined: a call does the store call and nothing else, so no
per-call inspection or closure (keyword arguments, rare, are bound with one ``partial``).

Every operation is listed in :data:`OPERATIONS`, so tests can cover each one (for
instance ``tests/store/test_operations_pure.py``: a transaction function may run twice).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from functools import partial
from types import MethodType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

from .._store.ahead import LatestRun, RunLock
from ..exceptions import StoreConflictError

if TYPE_CHECKING:
    from .._store.gateway import Store
    from .._store.tx import StoreTx

P = ParamSpec("P")
R = TypeVar("R")


class HasStore(Protocol):
    @property
    def store(self) -> Store: ...


S = TypeVar("S", bound=HasStore)

TxFunction = Callable[Concatenate[S, "StoreTx", P], R]
Method = Callable[Concatenate[S, P], Coroutine[Any, Any, R]]


@dataclass(frozen=True)
class Operation:
    """One operation of the service: its method's name, its transaction function."""

    name: str  #: ``Class.method``
    fn: Callable[..., Any]  #: the transaction function, ``fn(service, tx, *args)``
    read: bool  #: run by ``Store.read`` (changes nothing)


#: Every operation defined with :func:`operation`, in definition order.
OPERATIONS: list[Operation] = []


@overload
def operation(fn: TxFunction[S, P, R], /) -> Method[S, P, R]: ...


@overload
def operation(
    *,
    read: bool = False,
    conflict_retries: int = 0,
    locks: Callable[..., Iterable[RunLock | LatestRun]] | None = None,
    alone: bool = False,
    inline: bool = False,
) -> Callable[[TxFunction[S, P, R]], Method[S, P, R]]: ...


def operation(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    read: bool = False,
    conflict_retries: int = 0,
    locks: Callable[..., Iterable[RunLock | LatestRun]] | None = None,
    alone: bool = False,
    inline: bool = False,
) -> Any:
    """The coroutine method running ``fn(self, tx, *args)`` in one store transaction.

    ``read=True``: a read (``Store.read``). ``conflict_retries``: run the transaction
    again, up to that many times, when it fails with :class:`StoreConflictError` (another
    process's change won a race; the next run sees it). ``locks(*args)``: what the change
    locks first, known before it runs: runs (:class:`RunLock`: a run id, the scheduled
    event id of an activity read with it, whether the change may close it) and workflow
    ids whose latest run it locks (:class:`LatestRun`, a start). A batch of changes on
    PostgreSQL locks and reads them all in one round trip (``engine._store.ahead``). A
    hint only: the change locks what it locks whatever it says. ``alone``: never batched
    with other changes on PostgreSQL (``Store.transaction``; a change that may wait to
    commit). ``inline``: on SQLite, run on the caller's thread when no other change waits
    for the writer (``engine._store.sqlite_writer``): for short changes of the hot path.
    """
    if fn is None:
        return lambda f: _make(f, read, conflict_retries, locks, alone, inline)
    return _make(fn, read, conflict_retries, locks)


def _make(
    fn: Callable[..., Any],
    read: bool,
    conflict_retries: int,
    locks: Callable[..., Iterable[RunLock | LatestRun]] | None = None,
    alone: bool = False,
    inline: bool = False,
) -> Callable[..., Any]:
    if locks is not None:
        fn.lock_hint = locks  # type: ignore[attr-defined]  # read by ahead.lock_hint
    # It writes runs' rows only through StoreTx's methods, which keep what SQLite's writer
    # kept of them true (``sqlite_writer.keeps_runs``); any other change makes it forget.
    fn.keeps_runs = True  # type: ignore[attr-defined]
    bind = MethodType
    method: Callable[..., Any]
    if read:

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            tx_fn = partial(fn, self, **kwargs) if kwargs else bind(fn, self)
            return self.store.read(tx_fn, *args)

    elif alone:
        assert not conflict_retries and not inline, "not needed yet"

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            tx_fn = partial(fn, self, **kwargs) if kwargs else bind(fn, self)
            return self.store.transaction(tx_fn, *args, alone=True)

    elif not conflict_retries:

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            tx_fn = partial(fn, self, **kwargs) if kwargs else bind(fn, self)
            return self.store.transaction(tx_fn, *args, inline=inline)

    else:

        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            tx_fn = partial(fn, self, **kwargs) if kwargs else bind(fn, self)
            for attempt in range(conflict_retries + 1):
                try:
                    return await self.store.transaction(tx_fn, *args, inline=inline)
                except StoreConflictError:
                    if attempt == conflict_retries:
                        raise
            raise AssertionError("unreachable")

    method.__name__ = fn.__name__
    method.__qualname__ = fn.__qualname__
    method.__doc__ = fn.__doc__
    method.__module__ = fn.__module__
    method.__wrapped__ = fn  # type: ignore[union-attr]
    OPERATIONS.append(Operation(fn.__qualname__, fn, read))
    return method


def tx_function(method: Callable[..., Any]) -> Callable[..., Any] | None:
    """The transaction function behind an operation's bound method: ``fn(tx, *args)``
    (to run it in a transaction the caller manages, e.g. a held one). None for anything
    else (a method replaced by a test, say): the caller then calls it as it is."""
    fn = getattr(method, "__wrapped__", None)
    owner = getattr(method, "__self__", None)
    if fn is None or owner is None:
        return None
    return partial(fn, owner)
