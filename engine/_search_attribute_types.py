"""Search attribute keys, pairs, updates and collections, as ``temporalio.common`` has them
(re-exported by ``engine.common``).

A key is a name and a type (``SearchAttributeKey.for_keyword("CustomerId")``); a
:class:`TypedSearchAttributes` is an immutable collection of (key, value) pairs, sorted by
name; ``key.value_set(v)`` and ``key.value_unset()`` are what
``workflow.upsert_search_attributes`` takes.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import IntEnum
from typing import Any, ClassVar, Generic, NamedTuple, TypeAlias, TypeVar, get_origin

#: The deprecated dict form's values: a list of one type per attribute.
SearchAttributeValues: TypeAlias = list[str] | list[int] | list[float] | list[bool] | list[datetime]
#: The deprecated dict form: ``{"CustomerId": ["c1"]}``.
SearchAttributes: TypeAlias = Mapping[str, SearchAttributeValues]
SearchAttributeValue: TypeAlias = str | int | float | bool | datetime | Sequence[str]
SearchAttributeValueType = TypeVar(
    "SearchAttributeValueType", str, int, float, bool, datetime, Sequence[str]
)


class SearchAttributeIndexedValueType(IntEnum):
    """How the server indexes a search attribute (Temporal's ``IndexedValueType``)."""

    TEXT = 1
    KEYWORD = 2
    INT = 3
    DOUBLE = 4
    BOOL = 5
    DATETIME = 6
    KEYWORD_LIST = 7


#: The ``type`` metadata of a search attribute payload, per type.
METADATA_TYPES = {
    SearchAttributeIndexedValueType.TEXT: "Text",
    SearchAttributeIndexedValueType.KEYWORD: "Keyword",
    SearchAttributeIndexedValueType.INT: "Int",
    SearchAttributeIndexedValueType.DOUBLE: "Double",
    SearchAttributeIndexedValueType.BOOL: "Bool",
    SearchAttributeIndexedValueType.DATETIME: "Datetime",
    SearchAttributeIndexedValueType.KEYWORD_LIST: "KeywordList",
}


class SearchAttributeKey(ABC, Generic[SearchAttributeValueType]):
    """A search attribute's name and type; made with the ``for_...`` functions."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The attribute's name."""

    @property
    @abstractmethod
    def indexed_value_type(self) -> SearchAttributeIndexedValueType:
        """How the server indexes it."""

    @property
    @abstractmethod
    def value_type(self) -> type[SearchAttributeValueType]:
        """The Python type of its values (``Sequence[str]`` for a keyword list)."""

    @property
    def origin_value_type(self) -> type:
        """:attr:`value_type` without generics (usable with ``isinstance``)."""
        return get_origin(self.value_type) or self.value_type

    @property
    def _metadata_type(self) -> str:
        return METADATA_TYPES[self.indexed_value_type]

    def value_set(
        self, value: SearchAttributeValueType
    ) -> SearchAttributeUpdate[SearchAttributeValueType]:
        """An update setting this attribute to ``value``."""
        return _SearchAttributeUpdate(self, value)

    def value_unset(self) -> SearchAttributeUpdate[SearchAttributeValueType]:
        """An update removing this attribute."""
        return _SearchAttributeUpdate(self, None)

    @staticmethod
    def for_text(name: str) -> SearchAttributeKey[str]:
        """A Text attribute (matched by its words)."""
        return _SearchAttributeKey(name, SearchAttributeIndexedValueType.TEXT, str)

    @staticmethod
    def for_keyword(name: str) -> SearchAttributeKey[str]:
        """A Keyword attribute (matched whole)."""
        return _SearchAttributeKey(name, SearchAttributeIndexedValueType.KEYWORD, str)

    @staticmethod
    def for_int(name: str) -> SearchAttributeKey[int]:
        """An Int attribute."""
        return _SearchAttributeKey(name, SearchAttributeIndexedValueType.INT, int)

    @staticmethod
    def for_float(name: str) -> SearchAttributeKey[float]:
        """A Double attribute."""
        return _SearchAttributeKey(name, SearchAttributeIndexedValueType.DOUBLE, float)

    @staticmethod
    def for_bool(name: str) -> SearchAttributeKey[bool]:
        """A Bool attribute."""
        return _SearchAttributeKey(name, SearchAttributeIndexedValueType.BOOL, bool)

    @staticmethod
    def for_datetime(name: str) -> SearchAttributeKey[datetime]:
        """A Datetime attribute (values must carry a time zone)."""
        return _SearchAttributeKey(name, SearchAttributeIndexedValueType.DATETIME, datetime)

    @staticmethod
    def for_keyword_list(name: str) -> SearchAttributeKey[Sequence[str]]:
        """A KeywordList attribute (a list of keywords; matched by element)."""
        return _SearchAttributeKey(
            name,
            SearchAttributeIndexedValueType.KEYWORD_LIST,
            Sequence[str],  # type: ignore[type-abstract]
        )

    @staticmethod
    def _from_metadata_type(name: str, metadata_type: str) -> SearchAttributeKey[Any] | None:
        for kind, spelled in METADATA_TYPES.items():
            if metadata_type in (spelled, f"INDEXED_VALUE_TYPE_{kind.name}"):
                return _SearchAttributeKey(name, kind, _VALUE_TYPES[kind])
        return None

    @staticmethod
    def _guess_from_untyped_values(
        name: str, vals: SearchAttributeValues
    ) -> SearchAttributeKey[Any] | None:
        # As temporalio guesses a type for the dict form: several strings are a list.
        if not vals:
            return None
        if len(vals) > 1:
            return SearchAttributeKey.for_keyword_list(name) if isinstance(vals[0], str) else None
        first = vals[0]
        if isinstance(first, str):
            return SearchAttributeKey.for_keyword(name)
        if isinstance(first, bool):
            return SearchAttributeKey.for_bool(name)
        if isinstance(first, int):
            return SearchAttributeKey.for_int(name)
        if isinstance(first, float):
            return SearchAttributeKey.for_float(name)
        if isinstance(first, datetime):
            return SearchAttributeKey.for_datetime(name)
        return None


_VALUE_TYPES: dict[SearchAttributeIndexedValueType, Any] = {
    SearchAttributeIndexedValueType.TEXT: str,
    SearchAttributeIndexedValueType.KEYWORD: str,
    SearchAttributeIndexedValueType.INT: int,
    SearchAttributeIndexedValueType.DOUBLE: float,
    SearchAttributeIndexedValueType.BOOL: bool,
    SearchAttributeIndexedValueType.DATETIME: datetime,
    SearchAttributeIndexedValueType.KEYWORD_LIST: Sequence[str],
}


@dataclass(frozen=True)
class _SearchAttributeKey(SearchAttributeKey[SearchAttributeValueType]):
    _name: str
    _indexed_value_type: SearchAttributeIndexedValueType
    _value_type: type[SearchAttributeValueType]

    @property
    def name(self) -> str:
        return self._name

    @property
    def indexed_value_type(self) -> SearchAttributeIndexedValueType:
        return self._indexed_value_type

    @property
    def value_type(self) -> type[SearchAttributeValueType]:
        return self._value_type


class SearchAttributePair(NamedTuple, Generic[SearchAttributeValueType]):
    """A key and its value."""

    key: SearchAttributeKey[SearchAttributeValueType]
    value: SearchAttributeValueType


class SearchAttributeUpdate(ABC, Generic[SearchAttributeValueType]):
    """A change to one attribute: set to :attr:`value`, or removed (None)."""

    @property
    @abstractmethod
    def key(self) -> SearchAttributeKey[SearchAttributeValueType]:
        """The attribute changed."""

    @property
    @abstractmethod
    def value(self) -> SearchAttributeValueType | None:
        """Its new value, or None to remove it."""


@dataclass(frozen=True)
class _SearchAttributeUpdate(SearchAttributeUpdate[SearchAttributeValueType]):
    _key: SearchAttributeKey[SearchAttributeValueType]
    _value: SearchAttributeValueType | None

    @property
    def key(self) -> SearchAttributeKey[SearchAttributeValueType]:
        return self._key

    @property
    def value(self) -> SearchAttributeValueType | None:
        return self._value


@dataclass(frozen=True)
class TypedSearchAttributes(Collection[SearchAttributePair[Any]]):
    """An immutable collection of search attribute pairs, sorted by name, no name twice."""

    search_attributes: Sequence[SearchAttributePair[Any]]
    empty: ClassVar[TypedSearchAttributes]

    def __post_init__(self) -> None:
        pairs = sorted(self.search_attributes, key=lambda pair: pair.key.name)
        object.__setattr__(self, "search_attributes", pairs)
        for before, pair in itertools.pairwise(pairs):
            if before.key.name == pair.key.name:
                raise ValueError(
                    f"Duplicate search attribute entries found for key {pair.key.name}"
                )

    def __len__(self) -> int:
        return len(self.search_attributes)

    def __getitem__(self, key: SearchAttributeKey[SearchAttributeValueType]) -> Any:
        found = next((v for k, v in self if k == key), None)
        if found is None:
            raise KeyError(key.name)
        return found

    def __iter__(self) -> Iterator[SearchAttributePair[Any]]:
        return iter(self.search_attributes)

    def __contains__(self, key: object) -> bool:
        return any(k == key for k, _ in self)

    def get(self, key: SearchAttributeKey[SearchAttributeValueType], default: Any = None) -> Any:
        """The value for ``key`` (same name and type), or ``default``."""
        try:
            return self[key]
        except KeyError:
            return default

    def updated(self, *search_attributes: SearchAttributePair[Any]) -> TypedSearchAttributes:
        """A copy with these pairs replacing those of the same names (or added)."""
        pairs = {p.key.name: p for p in self.search_attributes}
        for pair in search_attributes:
            pairs[pair.key.name] = pair
        return TypedSearchAttributes(list(pairs.values()))


TypedSearchAttributes.empty = TypedSearchAttributes([])
