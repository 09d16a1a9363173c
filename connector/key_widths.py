"""Row keys that must fit a fixed-width key codec before a key range or an index answer is trusted.

A row key mapped to a fixed-width type (``key INT :key`` under the binary
SerDe: 4 bytes; the order-preserving forms; ``DATE``, ``BIGINT`` ...) is
decoded where a read decodes it, and then a key of another width fails the
read with the SerDe's :class:`~serde.errors.DecodeError`.  But a pushed key
range is a byte seek, and ``count()`` over it or ``MIN``/``MAX`` of the key
are answered from the block indexes and one edge key: no key is decoded, and
keys of another width (text keys under an ``INT`` mapping) would be counted,
skipped or sorted as if they were numbers.

So before such answers, every region of the table is checked: each store
file records its shortest and longest key in its info, so a file whose keys
all have the width is not read; the memstore's keys and files written before
that are measured by one length kernel
(:func:`storage.engine.key_not_of_width`).  The first key of
another width fails the plan with the SerDe's own one-line decode error.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import pyarrow as pa

from serde.errors import DecodeError
from serde.mapping import ColumnKind
from storage import KeyRange
from storage.engine import FileSystem, key_not_of_width, pin_table, table_files
from storage.keys import intersect

from .input_format import TableInputFormat
from .scanning import is_remote_root

__all__ = ["key_column", "fixed_key_width", "check_key_widths", "KeyCheckedInputFormat"]


def key_column(mapping) -> Any:
    """The single row-key column of a mapping (None for a composite key)."""
    if mapping.rowkey is not None:
        return None
    return next((c for c in mapping.columns if c.kind == ColumnKind.KEY), None)


def fixed_key_width(serde) -> int | None:
    """The stored width of the row key where its codec is fixed-width, else None
    (strings, binaries, text numbers, composite keys)."""
    column = key_column(serde.mapping)
    if column is None:
        return None
    return serde.codec(column, column.type, "key").fixed_width


def check_key_widths(serde, root: str, table: str, snapshot: Any = None) -> None:
    """Raise the SerDe's :class:`DecodeError` for the first row key of ``table`` whose length
    is not the key codec's width; nothing for a key codec without a fixed width.  ``snapshot``:
    the whole table as the caller just pinned it (else it is pinned here)."""
    width = fixed_key_width(serde)
    if width is None:
        return
    if is_remote_root(root):
        return  # a region server pins no files: its keys are decoded where a read decodes them
    bad = key_not_of_width(table_files(root, table), table, width, snapshot)
    if bad is None:
        return
    column = key_column(serde.mapping)
    rows = pa.RecordBatch.from_arrays([pa.array([bad], pa.binary())], names=["key"])
    serde.deserialize_batch(rows, [column.name])  # raises the read's own error where the SerDe fails on it
    # a SerDe that reads bad cells as null (serde.on.error=null) cannot do so here: the
    # key range or the index count has already taken the key as if it fitted
    raise DecodeError(bad, column.name, bad, f"a row key of {len(bad)} bytes where {column.type.name.upper()} takes "
                                             f"{width}, under a key range or a count from the indexes")


class KeyCheckedInputFormat(TableInputFormat):
    """A :class:`TableInputFormat` whose :meth:`get_splits` checks the pinned regions' row keys
    against ``serde``'s fixed-width key codec (:func:`check_key_widths`)."""

    def __init__(self, conf: dict, key_ranges: Sequence[KeyRange] | None, serde):
        super().__init__(conf, key_ranges)
        self.serde = serde

    def _pin(self, table_fs: FileSystem, spans: Sequence[KeyRange]) -> Any:
        """The whole table pinned once: every region's keys checked (a key range is a byte seek,
        so a key of another width may lie outside it), then the regions ``spans`` reach kept for
        the splits.  One pin for both, not two: a plan fails before it registers any pin."""
        snapshot = pin_table(table_fs)
        check_key_widths(self.serde, self.root, self.table_name, snapshot)
        reached = tuple(p for p in snapshot.regions if intersect(spans, [(p.start, p.end)]))
        return dataclasses.replace(snapshot, regions=reached)
