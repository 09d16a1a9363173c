"""Arrays and maps of primitives stored as text in one cell, as LazySimpleSerDe does.

::

    array<int>          1\\x022\\x023                 items separated by collection.delim
    map<string,int>     a\\x031\\x02b\\x032           entries by collection.delim, key/value by mapkey.delim

An empty cell is an empty array or map; an item equal to the null sequence
is a null item (map keys cannot be null), so a whole cell ``\\N`` is an
array of one null (a null column is a missing cell).  An item that does not decode makes
the whole value bad.  The batch path splits the column with
``pc.split_pattern``, decodes all items of all rows with the element codec's
kernel, and rebuilds the list/map arrays from offsets.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from serde.codecs.text import TextCodec, TextOptions
from serde.types import DataType

__all__ = ["ArrayText", "MapText"]


def _split(strings: pa.Array, delim: str) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """Split each string on ``delim``; an empty string has no items.

    Returns ``(offsets, items, parents)`` with int32 offsets into ``items``
    and the row index of each item.
    """
    n = len(strings)
    lists = pc.split_pattern(strings, delim)
    offsets = np.asarray(lists.offsets, dtype=np.int64)
    items = lists.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    offsets = offsets - offsets[0]
    lengths = np.diff(offsets)
    empty = pc.equal(strings, "").fill_null(False).to_numpy(zero_copy_only=False)
    if empty.any():
        parents = np.repeat(np.arange(n), lengths)
        items = items.filter(pa.array(~empty[parents]))
        lengths = np.where(empty, 0, lengths)
    new_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=new_offsets[1:])
    return new_offsets, items, np.repeat(np.arange(n), lengths)


def _row_flags(parents: np.ndarray, flags: np.ndarray | None, n: int) -> np.ndarray:
    """Per row: True when any of its items is flagged."""
    out = np.zeros(n, dtype=bool)
    if flags is not None and flags.any():
        out[parents[flags]] = True
    return out


def _drop_rows(offsets: np.ndarray, parents: np.ndarray, drop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and item mask after emptying the rows in ``drop``."""
    keep_items = ~drop[parents]
    lengths = np.where(drop, 0, np.diff(offsets))
    new_offsets = np.zeros(len(offsets), dtype=np.int32)
    np.cumsum(lengths, out=new_offsets[1:])
    return new_offsets, keep_items


def _check_delims(text: str, delims: tuple[str, ...]) -> str:
    for d in delims:
        if d in text:
            raise ValueError(f"item {text!r} contains the separator {d!r}")
    return text


class ArrayText(TextCodec):
    """``array<primitive>`` as delimited text."""

    reads_null_sequence = False

    def __init__(self, data_type: DataType, options: TextOptions, element: TextCodec):
        super().__init__(data_type, options)
        self.element = element
        self.delim = options.collection_delim
        self.delims = (options.collection_delim, options.mapkey_delim)

    def _item(self, text: str) -> Any:
        return None if text == self.null_text else self.element.parse(text)

    def parse(self, text: str) -> list:
        if text == "":
            return []
        return [self._item(part) for part in text.split(self.delim)]

    def format(self, value: Any) -> str:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        fmt = self.element.format
        return self.delim.join(
            self.null_text if v is None else _check_delims(fmt(v), self.delims) for v in value
        )

    def parse_array(self, strings):
        n = len(strings)
        offsets, items, parents = _split(strings, self.delim)
        values, bad = self.element.decode_array(items)
        row_bad = _row_flags(parents, bad, n)
        offsets, keep = _drop_rows(offsets, parents, row_bad)
        valid = pc.is_valid(strings).to_numpy(zero_copy_only=False)
        handled = valid & ~row_bad
        result = pa.ListArray.from_arrays(
            pa.array(offsets), values.filter(pa.array(keep)), type=self.arrow_type, mask=pa.array(~handled)
        )
        return result, handled

    def format_array(self, arr):
        if arr.offset:
            arr = pa.concat_arrays([arr])  # unsliced, so offsets index the child directly
        offsets = pa.array(np.asarray(arr.offsets, dtype=np.int32))
        items = self.element.format_array(arr.values)
        _reject_delims(items, self.delims)
        items = items.fill_null(self.null_text)
        lists = pa.ListArray.from_arrays(offsets, items, mask=arr.is_null())
        return pc.binary_join(lists, self.delim)


class MapText(TextCodec):
    """``map<primitive, primitive>`` as delimited text."""

    reads_null_sequence = False

    def __init__(self, data_type: DataType, options: TextOptions, key: TextCodec, value: TextCodec):
        super().__init__(data_type, options)
        self.key = key
        self.value = value
        self.delim = options.collection_delim
        self.kv = options.mapkey_delim
        self.delims = (options.collection_delim, options.mapkey_delim)

    def parse(self, text: str) -> dict:
        out: dict = {}
        if text == "":
            return out
        for entry in text.split(self.delim):
            k, sep, v = entry.partition(self.kv)
            if not sep:
                raise ValueError(f"map entry {entry!r} has no key separator")
            if k == self.null_text:
                raise ValueError("a map key cannot be null")
            out[self.key.parse(k)] = None if v == self.null_text else self.value.parse(v)
        return out

    def format(self, value: Any) -> str:
        if not isinstance(value, dict):
            raise TypeError(f"expected a dict, got {type(value).__name__}")
        parts = []
        for k, v in value.items():
            if k is None:
                raise ValueError("a map key cannot be None")
            key = _check_delims(self.key.format(k), self.delims)
            val = self.null_text if v is None else _check_delims(self.value.format(v), self.delims)
            parts.append(f"{key}{self.kv}{val}")
        return self.delim.join(parts)

    def parse_array(self, strings):
        n = len(strings)
        offsets, entries, parents = _split(strings, self.delim)
        pairs = pc.split_pattern(entries, self.kv, max_splits=1)
        two = pc.equal(pc.list_value_length(pairs), 2).fill_null(False)
        pairs = pc.if_else(two, pairs, pa.nulls(len(pairs), pairs.type))
        keys, key_bad = self.key.decode_array(pc.list_element(pairs, 0))
        values, value_bad = self.value.decode_array(pc.list_element(pairs, 1))
        # An entry is bad when it lacks the separator, its key is null or does not decode, or its value does not decode.
        entry_bad = ~two.to_numpy(zero_copy_only=False) | ~pc.is_valid(keys).to_numpy(zero_copy_only=False)
        for flags in (key_bad, value_bad):
            if flags is not None:
                entry_bad |= flags
        row_bad = _row_flags(parents, entry_bad, n)
        offsets, keep = _drop_rows(offsets, parents, row_bad)
        valid = pc.is_valid(strings).to_numpy(zero_copy_only=False)
        handled = valid & ~row_bad
        keep_arr = pa.array(keep)
        result = pa.MapArray.from_arrays(
            pa.array(offsets), keys.filter(keep_arr), values.filter(keep_arr), type=self.arrow_type, mask=pa.array(~handled)
        )
        return result, handled

    def format_array(self, arr):
        if arr.offset:
            arr = pa.concat_arrays([arr])
        offsets = pa.array(np.asarray(arr.offsets, dtype=np.int32))
        keys = self.key.format_array(arr.keys)
        values = self.value.format_array(arr.items)
        _reject_delims(keys, self.delims)
        _reject_delims(values, self.delims)
        entries = pc.binary_join_element_wise(keys, values.fill_null(self.null_text), self.kv)
        lists = pa.ListArray.from_arrays(offsets, entries, mask=arr.is_null())
        return pc.binary_join(lists, self.delim)


def _reject_delims(items: pa.Array, delims: tuple[str, ...]) -> None:
    for d in delims:
        hits = pc.match_substring(items, d).fill_null(False)
        if hits.true_count:
            first = items.filter(hits)[0].as_py()
            raise ValueError(f"item {first!r} contains the separator {d!r}")
