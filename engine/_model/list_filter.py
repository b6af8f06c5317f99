"""Temporal's List Filter, read into a tree: ``CustomerId = 'c1' AND StartTime > '...'``.

The language is the one Temporal's visibility takes (``client.list_workflows(query)``,
``count_workflows``, ``temporal workflow list --query``): comparisons ``=``, ``!=``, ``>``,
``>=``, ``<``, ``<=``; ``IN (...)`` and ``NOT IN``; ``BETWEEN a AND b`` and ``NOT BETWEEN``;
``STARTS_WITH``; ``IS NULL`` and ``IS NOT NULL``; ``AND``, ``OR``, ``NOT`` and parentheses;
then ``ORDER BY`` (for listing) or ``GROUP BY`` (for counting). Attribute names are case
sensitive and may be backquoted; values are quoted strings (single or double quotes,
a quote doubled or backslashed inside), numbers, or ``true``/``false``. Keywords are case
insensitive.

The grammar is lark's (an LALR parser, built once); this module knows nothing of types or
SQL: ``engine._service.visibility`` checks each value against its attribute's type and
writes the parameterised SQL. Errors are :class:`ListFilterError` with the column the
problem is at (1-based, as an editor counts) and what was expected there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lark

from ..exceptions import InvalidArgumentError

_GRAMMAR = r"""
start: [where] [order | group]

where: or_expr
?or_expr: and_expr (_OR and_expr)*
?and_expr: not_expr (_AND not_expr)*
?not_expr: NOT not_expr -> negation
         | "(" or_expr ")"
         | predicate

predicate: name OP value                               -> compare
         | name [NOT] _IN "(" value ("," value)* ")"    -> member
         | name [NOT] _BETWEEN value _AND value          -> between
         | name _STARTS_WITH value                      -> starts_with
         | name _IS [NOT] _NULL                          -> is_null

order: _ORDER _BY order_item ("," order_item)*
order_item: order_name [ASC | DESC]
group: _GROUP _BY group_name ("," group_name)*

name: NAME | BACKQUOTED
order_name: NAME | BACKQUOTED
group_name: NAME | BACKQUOTED
value: STRING | NUMBER | TRUE | FALSE | NAME | BACKQUOTED

OP: "!=" | "<>" | ">=" | "<=" | "=" | ">" | "<"
_AND.2: /and\b/i
_OR.2: /or\b/i
NOT.2: /not\b/i
_IN.2: /in\b/i
_BETWEEN.2: /between\b/i
_STARTS_WITH.2: /starts_with\b/i
_IS.2: /is\b/i
_NULL.2: /null\b/i
TRUE.2: /true\b/i
FALSE.2: /false\b/i
_ORDER.2: /order\b/i
_GROUP.2: /group\b/i
_BY.2: /by\b/i
ASC.2: /asc\b/i
DESC.2: /desc\b/i
NAME: /[A-Za-z_][A-Za-z0-9_.]*/
BACKQUOTED: /`[^`]+`/
STRING: /'(?:[^'\\]|\\.|'')*'/ | /"(?:[^"\\]|\\.|"")*"/
NUMBER: /[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/

%import common.WS
%ignore WS
"""

_PARSER = lark.Lark(_GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=True)

#: What each terminal is called in an error message.
_SAID = {
    "NAME": "an attribute name",
    "BACKQUOTED": "an attribute name",
    "STRING": "a value",
    "NUMBER": "a value",
    "TRUE": "a value",
    "FALSE": "a value",
    "OP": "an operator (=, !=, >, >=, <, <=)",
    "_IN": "IN",
    "NOT": "NOT",
    "_BETWEEN": "BETWEEN",
    "_STARTS_WITH": "STARTS_WITH",
    "_IS": "IS",
    "_NULL": "NULL",
    "_AND": "AND",
    "_OR": "OR",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "_ORDER": "ORDER BY",
    "_GROUP": "GROUP BY",
    "_BY": "BY",
    "ASC": "ASC",
    "DESC": "DESC",
    "$END": "the end of the filter",
}


class ListFilterError(InvalidArgumentError):
    """A list filter that cannot be read or does not fit its attributes' types; the
    message starts with the column (1-based) of the problem: ``column 14 of the list
    filter: expected a value after '='``."""

    def __init__(self, message: str, column: int | None = None) -> None:
        where = "the list filter" if column is None else f"column {column} of the list filter"
        super().__init__(f"{where}: {message}")
        #: Where the problem is (1-based), or None when it is about the whole filter.
        self.column = column


@dataclass(frozen=True)
class Name:
    """An attribute as written (without backquotes), and where."""

    text: str
    column: int


@dataclass(frozen=True)
class Value:
    """A literal: ``kind`` is "string", "number", "bool" or "name" (an unquoted word on
    the right of an operator, which Temporal refuses: it is reported, not guessed)."""

    kind: str
    raw: Any
    column: int


@dataclass(frozen=True)
class Compare:
    name: Name
    op: str  # one of = != > >= < <=
    value: Value


@dataclass(frozen=True)
class Member:
    name: Name
    values: tuple[Value, ...]
    negated: bool


@dataclass(frozen=True)
class Between:
    name: Name
    low: Value
    high: Value
    negated: bool


@dataclass(frozen=True)
class StartsWith:
    name: Name
    prefix: Value


@dataclass(frozen=True)
class IsNull:
    name: Name
    negated: bool


@dataclass(frozen=True)
class And:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Not:
    item: Expr


Expr = Compare | Member | Between | StartsWith | IsNull | And | Or | Not


@dataclass(frozen=True)
class OrderItem:
    name: Name
    descending: bool


@dataclass(frozen=True)
class ListFilter:
    """A whole filter: the condition (None: every run), ORDER BY and GROUP BY."""

    where: Expr | None
    order_by: tuple[OrderItem, ...] = ()
    group_by: tuple[Name, ...] = ()


def parse(query: str | None) -> ListFilter:
    """Read ``query`` (None or blank: everything). Raises :class:`ListFilterError`."""
    if query is None or not query.strip():
        return ListFilter(None)
    try:
        tree = _PARSER.parse(query)
        return _Build().transform(tree)  # type: ignore[no-any-return]
    except lark.UnexpectedInput as err:
        raise _syntax_error(query, err) from None
    except lark.exceptions.VisitError as err:  # raised by a _Build method
        if isinstance(err.orig_exc, ListFilterError):
            raise err.orig_exc from None
        if isinstance(err.orig_exc, RecursionError):
            raise _too_deep() from None
        raise
    except RecursionError:
        raise _too_deep() from None


def _too_deep() -> ListFilterError:
    return ListFilterError("the filter nests too deeply (NOT or parentheses)")


def _syntax_error(query: str, err: lark.UnexpectedInput) -> ListFilterError:
    column = int(getattr(err, "column", 0) or 0)
    token = getattr(err, "token", None)
    at_end = token is None or token.type == "$END"
    if (
        isinstance(err, lark.UnexpectedEOF)
        or column <= 0
        or (isinstance(err, lark.UnexpectedToken) and at_end)
    ):
        column = len(query.rstrip()) + 1
    before = query[: column - 1].rstrip()
    after = f" after {_last_word(before)!r}" if before else " at the start"
    # ``accepts`` (lark tries each terminal on a copy of the parser) is exact where
    # ``expected`` is the LALR state's lookahead, which can hold terminals of merged states.
    terminals = getattr(err, "accepts", None) or getattr(err, "expected", None) or ()
    expected = sorted({_SAID.get(t, t) for t in terminals})
    wanted = _alternatives(expected) if expected else "something else"
    if isinstance(err, lark.UnexpectedCharacters):
        found = query[column - 1 : column]
        if found in "'\"":
            return ListFilterError(f"the string that starts here has no closing {found}", column)
        if found == "`":
            return ListFilterError("the backquoted name that starts here has no closing `", column)
        return ListFilterError(f"{found!r} cannot stand here{after}", column)
    keyword = _keyword_read_as_a_name(query, before, terminals)
    if keyword is not None:
        word, at = keyword
        return ListFilterError(
            f"expected an attribute name, not the keyword {word} (an attribute of that "
            f"name is written `{word}`)",
            at,
        )
    if at_end:
        return ListFilterError(f"the filter ends too soon: expected {wanted}{after}", column)
    return ListFilterError(f"expected {wanted}{after}, not {str(token)[:40]!r}", column)


#: Words of the language: where no keyword may stand, the lexer reads one as a name.
_KEYWORDS = {
    "AND",
    "OR",
    "NOT",
    "IN",
    "BETWEEN",
    "STARTS_WITH",
    "IS",
    "NULL",
    "ORDER",
    "GROUP",
    "BY",
}


def _keyword_read_as_a_name(query: str, before: str, terminals: Any) -> tuple[str, int] | None:
    """``WorkflowId = 'a' AND OR ...``: the parser took OR for an attribute name and then
    wanted an operator after it. Say so at the keyword (its word and 1-based column)."""
    words = before.split()
    if not words or "OP" not in set(terminals):
        return None
    word = words[-1]
    if word.upper() not in _KEYWORDS:
        return None
    return word.upper(), len(before) - len(word) + 1


def _last_word(text: str) -> str:
    piece = text.split()[-1] if text.split() else text
    return piece[-40:]


def _alternatives(items: list[str]) -> str:
    if "a value" in items:
        # An unquoted word is read as a value only to say it should be quoted.
        items = [i for i in items if i != "an attribute name"]
    if "a value" in items and len(items) > 1:
        items = ["a value", *(i for i in items if i != "a value")]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _string(token: str) -> str:
    quote = token[0]
    body = token[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append({"n": "\n", "t": "\t", "r": "\r", "0": "\0"}.get(nxt, nxt))
            i += 2
        elif c == quote and i + 1 < len(body) and body[i + 1] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


class _Build(lark.Transformer[Any, Any]):
    """The parse tree into the dataclasses above."""

    def start(self, items: list[Any]) -> ListFilter:
        where, tail = items
        order: tuple[OrderItem, ...] = ()
        group: tuple[Name, ...] = ()
        if isinstance(tail, tuple) and tail and isinstance(tail[0], OrderItem):
            order = tail
        elif isinstance(tail, tuple):
            group = tail
        return ListFilter(where, order, group)

    def where(self, items: list[Any]) -> Any:
        return items[0]

    def name(self, items: list[lark.Token]) -> Name:
        token = items[0]
        text = str(token)
        if token.type == "BACKQUOTED":
            text = text[1:-1]
        return Name(text, int(token.column or 0))

    order_name = group_name = name

    def value(self, items: list[lark.Token]) -> Value:
        token = items[0]
        column = int(token.column or 0)
        kind = token.type
        if kind == "STRING":
            return Value("string", _string(str(token)), column)
        if kind == "NUMBER":
            text = str(token)
            number: int | float
            try:
                number = int(text)
            except ValueError:
                if text.lstrip("+-").isdigit():  # past Python's limit on digits
                    raise ListFilterError(
                        f"the number has {len(text):,} digits: too large for any attribute",
                        column,
                    ) from None
                number = float(text)
            return Value("number", number, column)
        if kind in ("TRUE", "FALSE"):
            return Value("bool", kind == "TRUE", column)
        text = str(token)
        return Value("name", text[1:-1] if kind == "BACKQUOTED" else text, column)

    def compare(self, items: list[Any]) -> Compare:
        name, op, value = items
        op = "!=" if str(op) == "<>" else str(op)
        return Compare(name, op, value)

    def member(self, items: list[Any]) -> Member:
        name, negated, *values = items
        return Member(name, tuple(values), negated is not None)

    def between(self, items: list[Any]) -> Between:
        name, negated, low, high = items
        return Between(name, low, high, negated is not None)

    def starts_with(self, items: list[Any]) -> StartsWith:
        name, prefix = items
        return StartsWith(name, prefix)

    def is_null(self, items: list[Any]) -> IsNull:
        name, negated = items
        return IsNull(name, negated is not None)

    def negation(self, items: list[Any]) -> Not:
        return Not(items[1])

    def or_expr(self, items: list[Any]) -> Or:
        return Or(tuple(i for i in items if not isinstance(i, lark.Token)))

    def and_expr(self, items: list[Any]) -> And:
        return And(tuple(i for i in items if not isinstance(i, lark.Token)))

    def order(self, items: list[Any]) -> tuple[OrderItem, ...]:
        return tuple(i for i in items if isinstance(i, OrderItem))

    def order_item(self, items: list[Any]) -> OrderItem:
        name, direction = items
        return OrderItem(name, direction is not None and direction.type == "DESC")

    def group(self, items: list[Any]) -> tuple[Name, ...]:
        return tuple(i for i in items if isinstance(i, Name))
