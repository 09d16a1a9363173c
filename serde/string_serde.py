"""The ``string`` SerDe: values as text, like Hive's LazySimpleSerDe.

Numbers, booleans, dates and timestamps are text with configurable formats
(``date.format``, ``timestamp.formats``), ``serialization.null.format``
marks nulls, and arrays/maps of primitives use ``collection.delim`` and
``mapkey.delim``.  Columns marked ``#b`` are binary.  Hive's HBaseSerDe with
its default storage type corresponds to this SerDe with the Hive mapping.
See :mod:`serde.codecs.text` and :mod:`serde.codecs.text_dates`.
"""

from __future__ import annotations

from serde.base import SerDe

__all__ = ["StringSerDe"]


class StringSerDe(SerDe):
    """Text encodings by default (Hive's default storage type)."""

    name = "string"
    default_storage = "string"
