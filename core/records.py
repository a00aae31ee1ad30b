"""Typed records that write themselves as JSON objects: the rows of ``palsgd map``'s
``map.json`` (:mod:`theory.compare.records`, :mod:`theory.compare.summary_records`) and of
``palsgd verify``'s report (:mod:`theory.verify.records`).

The results are frozen dataclasses; they become plain dicts only where the files are
written. :class:`JsonRow` is their base: :meth:`JsonRow.to_dict` gives the JSON object as
written (fields in declaration order, nested records converted, the fields of
``omit_none`` left out when ``None``), and the record reads like that object
(``row["key"]``, ``row.get(key)``, ``key in row``, iteration over the keys: a read-only
:class:`~collections.abc.Mapping`), so code written against the JSON keys reads a record
too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields
from typing import ClassVar, Union

__all__ = ["Json", "JsonObject", "JsonRow", "plain"]

#: a JSON value before :func:`core.io.json_safe` (numbers may be NumPy scalars, infinities
#: floats; tuples are written as lists)
Json = Union[None, bool, int, float, str, Sequence["Json"], Mapping[str, "Json"]]  # noqa: UP007
#: a JSON object as written
JsonObject = dict[str, Json]


def plain(value: object) -> Json:
    """``value`` with every record converted by its ``to_dict`` and every mapping made a
    dict, recursively (lists stay lists, tuples tuples)."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return plain(to_dict())
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    return value  # type: ignore[return-value]  # a number, string, None or NumPy scalar


class JsonRow(Mapping[str, Json]):
    """Base of a frozen dataclass written as one JSON object (see the module docstring).

    ``omit_none``: the optional fields, left out of the object when ``None`` (a key that is
    absent from ``map.json`` rather than ``null``)."""

    __slots__ = ()
    omit_none: ClassVar[frozenset[str]] = frozenset()

    def to_dict(self) -> JsonObject:
        """The JSON object of this record (see the class docstring)."""
        out: JsonObject = {}
        for f in fields(self):  # type: ignore[arg-type]  # subclasses are dataclasses
            v = getattr(self, f.name)
            if v is None and f.name in self.omit_none:
                continue
            out[f.name] = plain(v)
        return out

    def __getitem__(self, key: str) -> Json:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())
