"""Column readers and writers: the per-column pieces a SerDe is assembled from.

A reader produces one or more output columns, row-wise through the function
``row_fn()`` returns (``fn(key, cells, timestamps, out)`` appends to ``out``)
and batch-wise through ``read_batch(batch, keys)``.  A writer does the
reverse.  Both report bad values through an :class:`ErrorPolicy`, which
either raises a :class:`~serde.errors.DecodeError` naming the row key,
column and bytes, or turns the value into a counted null.

The profiler drives readers one at a time to attribute time per column.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import datetime as _dt
from typing import Any, Callable, Collection, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from serde.codecs.binary_arrays import as_binary, binary_from_row_slice, decode_dictionary, valid_mask
from storage.kernels.cell_columns import one_array
from serde.codecs.epoch import EPOCH, MAX_US, MIN_US
from serde.codecs.base import Codec
from serde.errors import DecodeError, EncodeError
from serde.rowkey import CompositeKey
from serde.stats import SerDeStats

__all__ = [
    "ErrorPolicy",
    "ColumnReader",
    "KeyReader",
    "KeyPartsReader",
    "CellReader",
    "FamilyReader",
    "TimestampReader",
    "ColumnWriter",
    "CellWriter",
    "FamilyWriter",
    "batch_column",
    "encode_column",
]

RowFn = Callable[[bytes, dict, "dict | None", list], None]


class ErrorPolicy:
    """``serde.on.error``: ``fail`` raises DecodeError, ``null`` counts a null."""

    def __init__(self, mode: str, stats: SerDeStats):
        self.fail = mode == "fail"
        self.stats = stats

    def row(self, key: bytes, column: str, raw: Any, reason: str) -> None:
        """One bad value on the row path: raise, or count it and return None."""
        if self.fail:
            self.stats.errors_raised += 1
            raise DecodeError(key, column, raw, reason)
        self.stats.record_nulls(column, 1, key, raw, reason)
        return None

    def batch(self, column: str, bad: np.ndarray | None, keys: pa.Array, raw: pa.Array, explain: Callable[[Any], str]) -> None:
        """Bad values of one column in a batch: raise for the first, or count them all."""
        if bad is None or not bad.any():
            return
        first = int(np.flatnonzero(bad)[0])
        key = keys[first].as_py()
        value = raw[first].as_py()
        reason = explain(value)
        if self.fail:
            self.stats.errors_raised += 1
            raise DecodeError(key, column, value, reason)
        self.stats.record_nulls(column, int(bad.sum()), key, value, reason)


def batch_column(batch: pa.RecordBatch, name: str, arrow_type: pa.DataType = pa.binary()) -> pa.Array:
    """Column ``name`` of a row batch, or all nulls when the batch lacks it."""
    index = batch.schema.get_field_index(name)
    if index < 0:
        return pa.nulls(batch.num_rows, arrow_type)
    return batch.column(index)


class ColumnReader(ABC):
    """Produces the output columns ``names`` from rows and row batches."""

    names: list[str]
    sources: tuple[str, ...] | None = None
    """The row batch's columns besides ``key`` that :meth:`read_batch` reads; None: any of them."""

    @abstractmethod
    def row_fn(self) -> RowFn:
        """The row-wise reader: ``fn(key, cells, timestamps, out)`` appends one value per name."""

    @abstractmethod
    def read_batch(self, batch: pa.RecordBatch, keys: pa.Array) -> list[pa.Array]:
        """One decoded array per name."""


class KeyReader(ColumnReader):
    """The whole row key as one column."""

    sources = ()

    def __init__(self, name: str, codec: Codec, policy: ErrorPolicy):
        self.names = [name]
        self.codec = codec
        self.policy = policy

    def row_fn(self) -> RowFn:
        name, codec, decode, bad = self.names[0], self.codec, self.codec.decode, self.policy.row

        def read(key, cells, ts, out):
            try:
                out.append(decode(key))
            except Exception:  # any decoder failure is a bad value
                out.append(bad(key, name, key, codec.explain(key)))

        return read

    def read_batch(self, batch, keys):
        keys = as_binary(keys)
        values, bad = self.codec.decode_array(keys)
        self.policy.batch(self.names[0], bad, keys, keys, self.codec.explain)
        return [values]


class KeyPartsReader(ColumnReader):
    """The parts of a composite row key, one column each."""

    sources = ()

    def __init__(self, names: Sequence[str], codecs: Sequence[Codec], composite: CompositeKey, policy: ErrorPolicy):
        self.names = list(names)
        self.codecs = list(codecs)
        self.composite = composite
        self.policy = policy
        self.label = "+".join(self.names)

    def _split_reason(self, key: bytes) -> str:
        try:
            self.composite.split(key)
        except ValueError as exc:
            return str(exc)
        return f"row key does not fit {self.composite.describe()}"

    def row_fn(self) -> RowFn:
        split, names, codecs, policy = self.composite.split, self.names, self.codecs, self.policy
        decoders = [c.decode for c in codecs]
        count = len(names)

        def read(key, cells, ts, out):
            try:
                parts = split(key)
            except ValueError as exc:
                if policy.fail:
                    policy.row(key, self.label, key, str(exc))
                for name in names:
                    policy.row(key, name, key, str(exc))
                out.extend([None] * count)
                return
            for name, codec, decode, part in zip(names, codecs, decoders, parts):
                try:
                    out.append(decode(part))
                except Exception:  # a bad part is a bad value of that column
                    out.append(policy.row(key, name, part, codec.explain(part)))

        return read

    def read_batch(self, batch, keys):
        found = self.read_parts(keys, self.names)
        return [found[name] for name in self.names]

    def read_parts(self, keys: pa.Array, wanted: Collection[str]) -> dict[str, pa.Array]:
        """The parts named in ``wanted`` (others are not decoded, nor their bad values seen), by name.

        Keys that are all present and of a fixed layout's full width (a dense block's key
        chunk) are decoded straight from their byte matrix, a fixed-width part from its own
        columns of it (no binary column per part); other keys are split first."""
        keys = as_binary(keys)
        picked = [i for i, name in enumerate(self.names) if name in wanted]
        out: dict[str, pa.Array] = {}
        fixed = self.composite.fixed_rows(keys)
        if fixed is not None:
            matrix, starts = fixed
            widths = self.composite.widths
            for i in picked:
                codec = self.codecs[i]
                end = starts[i] + widths[i]
                decode_matrix = getattr(codec, "decode_matrix", None)
                if decode_matrix is not None and end - starts[i] == getattr(codec, "fixed_width", None):
                    values = decode_matrix(matrix[:, starts[i] : end])
                    if values is not None:
                        out[self.names[i]] = values
                        continue
                part = binary_from_row_slice(matrix, starts[i], end - starts[i])
                values, bad = codec.decode_array(part)
                self.policy.batch(self.names[i], bad, keys, part, codec.explain)
                out[self.names[i]] = values
            return out
        parts, bad_split = self.composite.split_array(keys)
        if bad_split.any():
            if self.policy.fail:
                self.policy.batch(self.label, bad_split, keys, keys, self._split_reason)
            for i in picked:
                self.policy.batch(self.names[i], bad_split, keys, keys, self._split_reason)
        for i in picked:
            codec, part = self.codecs[i], parts[i]
            values, bad = codec.decode_array(part)
            self.policy.batch(self.names[i], bad, keys, part, codec.explain)
            out[self.names[i]] = values
        return out


class CellReader(ColumnReader):
    """One cell ``family:qualifier`` as one column."""

    def __init__(self, name: str, cell: str, codec: Codec, policy: ErrorPolicy):
        self.names = [name]
        self.cell = cell
        self.sources = (cell,)
        self.qualifier = cell.encode("utf-8")
        self.codec = codec
        self.policy = policy

    def row_fn(self) -> RowFn:
        name, q, codec, decode, bad = self.names[0], self.qualifier, self.codec, self.codec.decode, self.policy.row

        def read(key, cells, ts, out):
            raw = cells.get(q)
            if raw is None:
                out.append(None)
                return
            try:
                out.append(decode(raw))
            except Exception:  # any decoder failure is a bad value
                out.append(bad(key, name, raw, codec.explain(raw)))

        return read

    def read_batch(self, batch, keys):
        column = batch_column(batch, self.cell)
        if pa.types.is_dictionary(column.type):  # dictionary codes: each distinct value decoded once
            values = decode_dictionary(self.codec, column)
            if values is not None:
                return [values]
        raw = as_binary(column)
        values, bad = self.codec.decode_array(raw)
        self.policy.batch(self.names[0], bad, keys, raw, self.codec.explain)
        return [values]


class FamilyReader(ColumnReader):
    """A whole family as a map qualifier -> value; a row without cells in it is null.

    A qualifier or value that does not decode makes the whole map bad.
    """

    def __init__(self, name: str, family: str, key_codec: Codec, value_codec: Codec, arrow_type: pa.DataType, policy: ErrorPolicy):
        self.names = [name]
        self.family = family
        self.sources = (family,)
        self.prefix = family.encode("utf-8") + b":"
        self.key_codec = key_codec
        self.value_codec = value_codec
        self.arrow_type = arrow_type
        self.policy = policy

    def _explain(self, qualifier: bytes, value: bytes) -> str:
        try:
            if self.key_codec.decode(qualifier) is None:
                return f"qualifier {qualifier!r} decodes to null"
        except Exception:  # report the qualifier's own error
            return f"qualifier {qualifier!r}: {self.key_codec.explain(qualifier)}"
        return self.value_codec.explain(value)

    def _first_bad(self, items: list[tuple[bytes, bytes]]) -> tuple[bytes, bytes]:
        for qualifier, value in items:
            try:
                if self.key_codec.decode(qualifier) is None:
                    return qualifier, value
                self.value_codec.decode(value)
            except Exception:  # this is the entry to report
                return qualifier, value
        return items[0]

    def row_fn(self) -> RowFn:
        name, prefix, policy = self.names[0], self.prefix, self.policy
        size = len(prefix)
        kdec, vdec = self.key_codec.decode, self.value_codec.decode

        def read(key, cells, ts, out):
            items = [(k[size:], v) for k, v in cells.items() if k.startswith(prefix)]
            if not items:
                out.append(None)
                return
            try:
                result = {}
                for qualifier, value in items:
                    k = kdec(qualifier)
                    if k is None:
                        raise ValueError("null map key")
                    result[k] = vdec(value)
                out.append(result)
            except Exception:  # one bad entry makes the map bad
                q, v = self._first_bad(items)
                out.append(policy.row(key, name, v, self._explain(q, v)))

        return read

    def read_batch(self, batch, keys):
        n = batch.num_rows
        col = batch_column(batch, self.family, pa.map_(pa.binary(), pa.binary()))
        col = one_array(col)
        if col.offset:
            col = pa.concat_arrays([col])  # unsliced, so offsets index keys/items directly
        offsets = np.asarray(col.offsets, dtype=np.int64)
        base = int(offsets[0])
        size = int(offsets[-1]) - base
        qualifiers = as_binary(col.keys.slice(base, size)) if len(col.keys) else pa.array([], pa.binary())
        values_raw = as_binary(col.items.slice(base, size)) if len(col.items) else pa.array([], pa.binary())
        offsets = offsets - base
        lengths = np.diff(offsets)
        parents = np.repeat(np.arange(n), lengths)
        kvals, kbad = self.key_codec.decode_array(qualifiers)
        vvals, vbad = self.value_codec.decode_array(values_raw)
        entry_bad = ~valid_mask(kvals)
        if kbad is not None:
            entry_bad |= kbad
        if vbad is not None:
            entry_bad |= vbad
        # A null item (no cell) cannot come from a scan; a null value from the
        # null sequence is a legitimate null.
        row_bad = np.zeros(n, dtype=bool)
        if entry_bad.any():
            row_bad[parents[entry_bad]] = True
            first_entry = int(np.flatnonzero(entry_bad)[0])
            row = int(parents[first_entry])
            q = qualifiers[first_entry].as_py()
            v = values_raw[first_entry].as_py()
            if self.policy.fail:
                self.policy.stats.errors_raised += 1
                raise DecodeError(keys[row].as_py(), self.names[0], v, self._explain(q, v))
            self.policy.stats.record_nulls(
                self.names[0], int(row_bad.sum()), keys[row].as_py(), v, self._explain(q, v)
            )
        present = valid_mask(col) & (lengths > 0) & ~row_bad
        keep = present[parents]
        lengths = np.where(present, lengths, 0)
        new_offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(lengths, out=new_offsets[1:])
        keep_arr = pa.array(keep)
        result = pa.MapArray.from_arrays(
            pa.array(new_offsets),
            kvals.filter(keep_arr),
            vvals.filter(keep_arr),
            type=self.arrow_type,
            mask=pa.array(~present),
        )
        return [result]


class TimestampReader(ColumnReader):
    """``:timestamp``: the latest timestamp (ms) among the row's mapped cells."""

    def __init__(self, name: str, cells: Sequence[str], as_datetime: bool, policy: ErrorPolicy):
        self.names = [name]
        self.cells = list(cells)
        self.sources = tuple(f"{c}@ts" for c in self.cells)
        self.qualifiers = [c.encode("utf-8") for c in cells]
        self.as_datetime = as_datetime
        self.policy = policy
        self.arrow_type = pa.timestamp("us") if as_datetime else pa.int64()

    def row_fn(self) -> RowFn:
        name, qualifiers, as_datetime, bad = self.names[0], self.qualifiers, self.as_datetime, self.policy.row

        def read(key, cells, ts, out):
            if not ts:
                out.append(None)
                return
            stamps = [ts[q] for q in qualifiers if ts.get(q) is not None]
            if not stamps:
                out.append(None)
                return
            latest = max(stamps)
            if not as_datetime:
                out.append(latest)
                return
            try:
                out.append(EPOCH + _dt.timedelta(milliseconds=latest))
            except OverflowError:
                out.append(bad(key, name, latest, "timestamp out of the datetime range"))

        return read

    def read_batch(self, batch, keys):
        columns = [batch_column(batch, f"{c}@ts", pa.int64()) for c in self.cells]
        latest = pc.max_element_wise(*columns, skip_nulls=True) if len(columns) > 1 else columns[0]
        latest = latest.cast(pa.int64())
        if not self.as_datetime:
            return [latest]
        millis = latest.fill_null(0).to_numpy(zero_copy_only=False)
        valid = valid_mask(latest)
        ok = valid & (millis >= -(-MIN_US // 1000)) & (millis <= MAX_US // 1000)
        bad = valid & ~ok
        self.policy.batch(self.names[0], bad, keys, latest, lambda v: "timestamp out of the datetime range")
        micros = np.where(ok, millis, 0) * 1000
        return [pa.array(micros, type=pa.timestamp("us"), mask=~ok)]


# -- writers -----------------------------------------------------------------


def encode_column(name: str, codec: Codec, arr: pa.Array) -> pa.Array:
    """``codec.encode_array`` with failures turned into an EncodeError naming the first bad value."""
    try:
        return codec.encode_array(arr)
    except (ValueError, TypeError, OverflowError, pa.ArrowException) as exc:
        for value in arr.to_pylist():
            if value is None:
                continue
            try:
                codec.encode(value)
            except Exception as inner:  # report the scalar encoder's message
                raise EncodeError(name, value, str(inner)) from None
        raise EncodeError(name, "<column>", str(exc)) from None


class ColumnWriter(ABC):
    """Writes the cells of some input columns, row-wise and batch-wise."""

    positions: list[int]

    @abstractmethod
    def write_row(self, values: Sequence[Any], cells: dict) -> None:
        """Add this writer's cells for one row of values to ``cells``."""

    @abstractmethod
    def write_batch(self, columns: Sequence[pa.Array]) -> dict[str, pa.Array]:
        """Row-batch columns (``"cf:q"`` / ``"cf"``) for a batch of values."""


class CellWriter(ColumnWriter):
    """One column into one cell; nulls write no cell."""

    def __init__(self, position: int, name: str, cell: str, codec: Codec):
        self.positions = [position]
        self.name = name
        self.cell = cell
        self.qualifier = cell.encode("utf-8")
        self.codec = codec

    def write_row(self, values, cells):
        value = values[self.positions[0]]
        if value is None:
            return
        try:
            cells[self.qualifier] = self.codec.encode(value)
        except (ValueError, TypeError, OverflowError) as exc:
            raise EncodeError(self.name, value, str(exc)) from None

    def write_batch(self, columns):
        return {self.cell: encode_column(self.name, self.codec, columns[self.positions[0]])}


class FamilyWriter(ColumnWriter):
    """A map column into one cell per entry of a family; null entries write no cell."""

    def __init__(self, position: int, name: str, family: str, key_codec: Codec, value_codec: Codec):
        self.positions = [position]
        self.name = name
        self.family = family
        self.prefix = family.encode("utf-8") + b":"
        self.key_codec = key_codec
        self.value_codec = value_codec

    def write_row(self, values, cells):
        value = values[self.positions[0]]
        if value is None:
            return
        if isinstance(value, list):  # Arrow's to_pylist form of a map
            value = dict(value)
        if not isinstance(value, dict):
            raise EncodeError(self.name, value, "expected a dict")
        try:
            for k, v in value.items():
                if k is None:
                    raise ValueError("a map key cannot be None")
                if v is not None:
                    cells[self.prefix + self.key_codec.encode(k)] = self.value_codec.encode(v)
        except (ValueError, TypeError, OverflowError) as exc:
            raise EncodeError(self.name, value, str(exc)) from None

    def write_batch(self, columns):
        arr = columns[self.positions[0]]
        if arr.offset:
            arr = pa.concat_arrays([arr])
        keys = encode_column(self.name, self.key_codec, arr.keys)
        items = encode_column(self.name, self.value_codec, arr.items)
        result = pa.MapArray.from_arrays(
            pa.array(np.asarray(arr.offsets, dtype=np.int32)),
            keys,
            items,
            type=pa.map_(pa.binary(), pa.binary()),
            mask=arr.is_null(),
        )
        return {self.family: result}
