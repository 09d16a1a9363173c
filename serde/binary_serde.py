"""The ``binary`` SerDe: values in HBase ``Bytes`` encodings.

Columns marked ``#s`` (or catalog ``storage: "string"``) are text, columns
marked ``#o`` (or ``encoding: "ordered"``) use the order-preserving binary
encodings; see :mod:`serde.codecs.hbase_bytes` for the byte layouts.
"""

from __future__ import annotations

from serde.base import SerDe

__all__ = ["BinarySerDe"]


class BinarySerDe(SerDe):
    """HBase ``Bytes`` encodings by default (hbase-spark's and Phoenix-style binary tables)."""

    name = "binary"
    default_storage = "binary"
