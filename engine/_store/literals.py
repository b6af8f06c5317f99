"""PostgreSQL: statements with their parameters written in, as psycopg would write them.

A PostgreSQL transaction sends its statements as one query of several, their parameters
written into the text (``StoreTx._sent_together``): psycopg's ``ClientCursor.mogrify``
writes each value as a literal. It is correct for every type, and slow for what the store
sends most: each call builds psycopg's adaptation state anew, encodes the statement to
bytes to find its cached template, and dumps each value through a chain of Python calls;
a lone activity step spent about 160 microseconds of its 1.4 ms of CPU there (nine or ten
statements, ``bench/README.md``).

:func:`bound` keeps one template per statement text (its placeholders found once) and
writes the values of the commonest types itself (``None``, ``bool``, ``int``, ``float``,
``str``, a list of plain words), in exactly the text psycopg's own quoting gives for them
on such a connection (``tests/store/test_literals.py`` holds the two to each other on
every kind of value);
every other value, and any statement or value it is not sure of, goes through psycopg:

- only on a connection whose encoding is UTF-8 and whose ``standard_conforming_strings``
  is on (PostgreSQL's default for both), checked once per cursor;
- only named placeholders (``%(name)s``) and ``%%``; a statement with any other ``%``
  (positional or binary placeholders, a stray percent) is left to psycopg whole, and so
  is a statement whose parameters are not a dict or lack one of its names (psycopg then
  raises its own error);
- only values of exactly those types (a subclass, an enum say, goes to psycopg); a text
  with a NUL character or one that UTF-8 cannot encode, and a float that is not finite,
  go to psycopg (which refuses the first two as it always did).
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
import weakref
from collections.abc import Callable
from functools import cache
from typing import Any

from .outage import classify

log = logging.getLogger("engine.store")

#: A placeholder psycopg would fill (or refuse): ``%(name)s``, ``%%``, or any other ``%``.
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%|%")

#: How many statement texts keep a template (the store has a few dozen; text built per
#: call, say with a varying number of values, stops being cached past this).
_KEPT = 512
#: How many times a statement text is written before it is prepared on the connections
#: that send it again (psycopg's own ``prepare_threshold`` default).
PREPARE_AFTER = 5
#: How many statements the store prepares on one connection at most.
MAX_PREPARED = 100


class _Template:
    """A statement text split at its placeholders, and what is known of preparing it."""

    __slots__ = ("index", "name", "order", "parts", "preparable", "prepare_text", "types", "uses")

    def __init__(self, parts: list[str], names: list[str]) -> None:
        #: The text around the placeholders (one more than there are placeholders).
        self.parts = tuple(parts)
        #: Each name once, in the order it first appears: the prepared statement's $1, $2...
        self.order = tuple(dict.fromkeys(names))
        where = {name: i for i, name in enumerate(self.order)}
        #: For each placeholder, which of :attr:`order` it is.
        self.index = tuple(where[name] for name in names)
        texts = [self.parts[0]]
        for i, after in zip(self.index, self.parts[1:], strict=True):
            texts.append(f"${i + 1}")
            texts.append(after)
        self.prepare_text = "".join(texts)
        digest = hashlib.blake2b(self.prepare_text.encode(), digest_size=10).hexdigest()
        #: The prepared statement's name on every connection (``dn_p`` and a digest).
        self.name = "dn_p" + digest
        #: How many times it was written (counted up to a connection's threshold).
        self.uses = 0
        #: The types PostgreSQL gave the parameters when it prepared the statement (as
        #: ``pg_prepared_statements`` names them), in :attr:`order`; None until then.
        self.types: tuple[str, ...] | None = None
        #: False for what PostgreSQL cannot prepare (statements but queries and writes),
        #: or once it refused to (say, a parameter of a type it cannot infer): it is then
        #: written in full.
        self.preparable = _PREPARABLE.match(self.prepare_text) is not None


_TEMPLATES: dict[str, _Template | None] = {}
#: The statements ``PREPARE`` takes (``SET``, ``LOCK`` and the like it does not).
_PREPARABLE = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH|VALUES)\b", re.IGNORECASE)


def _template(sql: str) -> _Template | None:
    """``sql`` split at its placeholders; None when psycopg should write the statement
    itself (see the module docstring)."""
    try:
        return _TEMPLATES[sql]
    except KeyError:
        pass
    parts: list[str] = []
    names: list[str] = []
    text: list[str] = []
    at = 0
    result: _Template | None = None
    for m in _PLACEHOLDER.finditer(sql):
        text.append(sql[at : m.start()])
        at = m.end()
        if m.group(0) == "%%":
            text.append("%")
            continue
        if m.group(1) is None:  # another kind of placeholder: psycopg's to write
            break
        parts.append("".join(text))
        names.append(m.group(1))
        text = []
    else:
        text.append(sql[at:])
        parts.append("".join(text))
        result = _Template(parts, names)
    if len(_TEMPLATES) < _KEPT:
        _TEMPLATES[sql] = result
    return result


def _text(value: str) -> str | None:
    if "\x00" in value:
        return None  # psycopg refuses it, with its own error
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return None  # (a lone surrogate) psycopg's error too
    if "\\" in value:  # psycopg writes these as an escape string, backslashes doubled
        return " E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
    return "'" + value.replace("'", "''") + "'"


def _int(value: int) -> str:
    # A negative number leads with a space, as psycopg writes it: after a minus sign in
    # the statement ("x -%(n)s"), "--5" would begin a comment.
    return " " + str(value) if value < 0 else str(value)


def _float(value: float) -> str | None:
    if not math.isfinite(value):
        return None
    text = repr(value) + "::float8"  # typed as psycopg types a float it sends apart
    return " " + text if math.copysign(1.0, value) < 0 else text


def _bool(value: bool) -> str:
    return "true" if value else "false"


#: An array element psycopg writes as it is: no quotes, spaces, braces, commas or
#: backslashes, not empty, and not the word NULL (checked apart).
_BARE_ELEMENT = re.compile(r"[A-Za-z0-9_.:-]+")


def _texts(value: list[Any]) -> str | None:
    # A list of plain words (run ids, most often): the array psycopg writes, untyped as
    # its text is (psycopg's own for anything else: other elements, numbers, nesting).
    for item in value:
        if type(item) is not str or not _BARE_ELEMENT.fullmatch(item) or item.lower() == "null":
            return None
    return "'{" + ",".join(value) + "}'"


_WRITERS: dict[type, Callable[[Any], str | None]] = {
    str: _text,
    int: _int,
    float: _float,
    bool: _bool,
    list: _texts,
}


class _Refused(Exception):
    """The fast path does not write this statement: psycopg does."""


def _literal(cur: Any, value: Any) -> str:
    if value is None:
        return "NULL"
    write = _WRITERS.get(type(value))
    literal = None if write is None else write(value)
    if literal is None:  # psycopg's own literal for this value
        literal = str(cur.mogrify("%(v)s", {"v": value}))
    return literal


def _fill(cur: Any, template: _Template, params: dict[str, Any]) -> str:
    try:
        values = [params[name] for name in template.order]
    except KeyError:
        raise _Refused from None
    literals = [_literal(cur, value) for value in values]
    if _prepared(cur, template) and _fit(template.types, values):
        if not literals:
            return "EXECUTE " + template.name
        return f"EXECUTE {template.name}({', '.join(literals)})"
    parts = template.parts
    out = [parts[0]]
    for i, after in zip(template.index, parts[1:], strict=True):
        out.append(literals[i])
        out.append(after)
    return "".join(out)


def _prepared(cur: Any, template: _Template) -> bool:
    """Whether ``template`` is prepared on the cursor's connection, preparing it now if
    it was written often enough (see :class:`Prepared`)."""
    prepared: Prepared | None = cur.prepared
    if prepared is None or not template.preparable:
        return False
    if template.name in prepared.names:
        return True
    if template.uses < prepared.after:
        template.uses += 1
        return False
    return prepared.prepare(cur.connection, template)


#: The integer types, and the values each holds.
_INT_RANGES = {"smallint": 2**15, "integer": 2**31, "bigint": 2**63}
#: The other types an integer fits.
_INT_TAKERS = ("numeric", "double precision")


def _fits(kind: str, value: Any) -> bool:
    """Whether ``value`` given to a prepared statement's parameter of type ``kind`` gives
    what the statement with the value written in gives. A text or NULL always does: the
    literal has no type of its own and takes the parameter's, as it would take the
    context's in the statement. A number or a boolean does where its type is the
    parameter's (an integer within the parameter's range), not where PostgreSQL would
    convert it (a float to an integer rounds it; in the statement, the integer column
    would be compared as a float); a list where the parameter is an array."""
    if value is None or type(value) is str:
        return True
    if type(value) is bool:
        return kind == "boolean"
    if type(value) is int:  # (into a float the same as in the statement: promoted)
        bound = _INT_RANGES.get(kind)
        return -bound <= value < bound if bound is not None else kind in _INT_TAKERS
    if type(value) is float:
        return kind == "double precision"
    if type(value) is list:
        return kind.endswith("[]")
    return False


def _fit(types: tuple[str, ...] | None, values: list[Any]) -> bool:
    return types is not None and all(map(_fits, types, values))


def _mogrify(cur: Any, sql: str, params: Any) -> str:
    if getattr(cur, "literals_ours", False) and type(params) is dict:
        template = _template(sql)
        if template is not None:
            try:
                return _fill(cur, template, params)
            except _Refused:
                pass
    return str(cur.mogrify(sql, params))


def bound(cur: Any, sql: str, params: Any) -> list[str]:
    """``sql`` with ``params`` written in as literals, one statement per parameter set
    (a list of dicts: several), for statements to send together as one query
    (``StoreTx._sent_together``); written as psycopg's ``ClientCursor.mogrify`` writes
    them (see the module docstring)."""
    if isinstance(params, list):
        return [_mogrify(cur, sql, p) for p in params]
    return [_mogrify(cur, sql, params or {})]


@cache
def _float8_literal() -> type:
    from psycopg.types.numeric import FloatDumper

    class Float8Literal(FloatDumper):
        """A float written in as ``...::float8``: typed as psycopg types it when it sends
        the value apart (a bare ``0.5`` would be NUMERIC, and ``:a + :b`` a Decimal)."""

        def quote(self, obj: Any) -> bytes:
            return bytes(super().quote(obj)) + b"::float8"

    return Float8Literal


class Prepared:
    """The store's statements prepared on one PostgreSQL connection (its session).

    PostgreSQL parses and plans a statement that comes as text each time: 15 to 45
    microseconds of planning alone for each of the statements of a lone activity step
    (``bench/README.md``). So a statement text written :attr:`after` times (in the
    process) is prepared (``PREPARE dn_p... AS``, its placeholders ``$1``, ``$2``...) on
    each connection that sends it again, in a round trip of its own (inside a savepoint
    when a transaction is open, so that a refusal leaves the transaction as it was), and
    written from then on as ``EXECUTE dn_p...(literals)``: still one query of several
    statements, still one round trip.

    PostgreSQL types each parameter from its context when it prepares the statement (the
    column it is compared with or written to), and converts each argument to that type.
    The same literal in the statement could be read otherwise (a float compared with an
    integer column is compared as a float; as an argument it would be rounded to an
    integer first), so a call is sent as ``EXECUTE`` only when each value fits its
    parameter's type (:func:`_fits`), and written in full otherwise. A statement PostgreSQL
    refuses to prepare (a parameter whose type it cannot infer) is written in full from
    then on, on every connection.

    A prepared statement lasts as long as the session, whatever happens to transactions.
    The store never ends one but with its connection, and psycopg prepares nothing of its
    own on these connections (:func:`track`); if something else did (``DISCARD ALL``, a
    pooler between the store and the server that hands one session's statements to
    another), ``EXECUTE`` fails with "prepared statement does not exist": the store takes
    the connection as lost and runs the transaction again on a new one
    (``engine._store.outage.classify``). Behind PgBouncer in transaction mode, turn
    prepared statements off: ``?prepare_threshold=none`` in the database URL
    (``engine._store.dialects``)."""

    __slots__ = ("__weakref__", "after", "names")

    def __init__(self, after: int = PREPARE_AFTER) -> None:
        #: How many times a statement is written (in the process) before it is prepared.
        self.after = after
        self.names: set[str] = set()

    def prepare(self, conn: Any, template: _Template) -> bool:
        """Prepare ``template`` on ``conn`` (the psycopg connection this belongs to);
        whether it is prepared now. A lost connection raises, as any statement would."""
        if len(self.names) >= MAX_PREPARED:
            return False
        from psycopg import Error
        from psycopg.pq import TransactionStatus

        name = template.name
        statement = f"PREPARE {name} AS {template.prepare_text}"
        types = f"SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = '{name}'"
        status = conn.info.transaction_status
        if status == TransactionStatus.INTRANS:
            # (apart: a query of several statements that fails to parse runs none of them)
            conn.execute("SAVEPOINT dn_prepare")
            query = f"{statement}; RELEASE SAVEPOINT dn_prepare; {types}"
        elif status == TransactionStatus.IDLE and conn.autocommit:
            query = f"{statement}; {types}"
        else:  # (a failed transaction, or one psycopg would begin for this statement)
            return False
        try:
            cur = conn.execute(query)
            while cur.nextset():  # (onto the last result: the types)
                pass
            row = cur.fetchone()
        except Error as err:
            if classify(err) is not None:
                raise  # the connection is lost: the transaction runs again
            if status == TransactionStatus.INTRANS:
                conn.execute("ROLLBACK TO SAVEPOINT dn_prepare; RELEASE SAVEPOINT dn_prepare")
            code = err.sqlstate or ""
            if code.startswith(("42", "0A")):  # refused as written: it never will be
                template.preparable = False
            # (else, a lock wait past the batch's lock_timeout say: tried again later)
            log.debug("statement not prepared (%s): %s", err, template.prepare_text[:200])
            return False
        template.types = tuple(row[0]) if row is not None else None
        self.names.add(name)
        return True


_SESSIONS: weakref.WeakKeyDictionary[Any, Prepared] = weakref.WeakKeyDictionary()
_SESSIONS_LOCK = threading.Lock()


def track(driver: Any, after: int = PREPARE_AFTER) -> None:
    """Let the store prepare statements on the psycopg connection ``driver`` (a new one:
    nothing of the store's is prepared on it yet), once written ``after`` times. The
    engine's PostgreSQL connections are tracked as they open (``dialects.create_engine``)
    unless the URL says ``prepare_threshold=none``; psycopg's own preparing is off on
    them (its ``prepare_threshold`` None): after a rollback psycopg sends ``DEALLOCATE
    ALL`` when it has prepared something, which would take the store's statements too."""
    with _SESSIONS_LOCK:
        _SESSIONS[driver] = Prepared(after)


def _session(driver: Any) -> Prepared | None:
    """What is prepared on the psycopg connection ``driver``; None where the store does
    not prepare (a connection not tracked, see :func:`track`)."""
    with _SESSIONS_LOCK:
        return _SESSIONS.get(driver)


@cache
def _cursor_class() -> type:
    from psycopg import ClientCursor

    class LiteralCursor(ClientCursor[Any]):
        """A ``ClientCursor`` that says whether :func:`bound` may write its literals."""

        literals_ours = False
        #: What is prepared on the connection (None: nothing is, see :class:`Prepared`).
        prepared: Prepared | None = None

    return LiteralCursor


def client_cursor(driver: Any) -> Any:
    """A psycopg ``ClientCursor`` on ``driver`` for statements written by :func:`bound`
    (its floats typed float8, as bound apart; rows as named tuples)."""
    from psycopg.rows import namedtuple_row

    cur = _cursor_class()(driver, row_factory=namedtuple_row)
    cur.adapters.register_dumper(float, _float8_literal())
    info = driver.info
    cur.literals_ours = (
        info.encoding == "utf-8" and info.parameter_status("standard_conforming_strings") == "on"
    )
    if cur.literals_ours:
        cur.prepared = _session(driver)
    return cur
