"""Decoding a run of checked WAL record payloads straight into one Arrow cell
table (the replay of a whole log): in one compiled call (``wal_columns``,
``storage/_native/wal.c``) when the kernels are built and on, else with NumPy
over all records at once (:func:`payloads_to_table_py`, the reference)."""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import pyarrow as pa

from ..errors import CorruptionError, InvalidArgument
from ..native import NATIVE as _NATIVE
from .format import PAYLOAD_HEADER, VALID_TYPE_MASK, VALID_TYPES

__all__ = ["LogShape", "decode_payloads", "payloads_to_table", "payloads_to_table_py"]

_BINARY, _INT64, _UINT8 = pa.binary(), pa.int64(), pa.uint8()


class LogShape(NamedTuple):
    """What the compiled decode saw of the cells in log order, so the reader
    need not look again: ``sorted`` (strict cell order, no key twice: no sort
    needed), ``clean`` (with ``sorted``: every cell a put, one per column) and
    ``family`` (the one family of every cell; None when there are several)."""

    sorted: bool
    clean: bool
    family: bytes | None


def decode_payloads(payloads: Sequence[bytes], where: str = "WAL") -> tuple[pa.Table, LogShape | None]:
    """:func:`payloads_to_table`, and the cells' :class:`LogShape` when the
    compiled decode ran (None: unknown, the reference ran)."""
    if _NATIVE is not None and payloads:
        out = _NATIVE.wal_columns(payloads if type(payloads) is list else list(payloads), VALID_TYPE_MASK,
                                  pa.allocate_buffer)
        if out is not None:
            from ..cells import CELL_SCHEMA, EMPTY_CELLS

            n, flags = out[0], out[11]
            if n == 0:
                return EMPTY_CELLS, None
            binary = [pa.Array.from_buffers(_BINARY, n, [None, out[1 + 2 * k],
                                                         out[2 + 2 * k]]) for k in range(4)]
            rows, families, qualifiers, values = binary
            table = pa.Table.from_arrays(
                [rows, families, qualifiers, pa.Array.from_buffers(_INT64, n, [None, out[9]]),
                 pa.Array.from_buffers(_UINT8, n, [None, out[10]]), values],
                schema=CELL_SCHEMA,
            )
            family = families[0].as_py() if flags & 4 else None
            return table, LogShape(bool(flags & 1), bool(flags & 1) and bool(flags & 2), family)
    return payloads_to_table_py(payloads, where), None


def payloads_to_table(payloads: Sequence[bytes], where: str = "WAL") -> pa.Table:
    """Decode checked record payloads (in log order) straight into one cell
    table in log order: no Python runs per cell.  The payloads' checksums have
    passed; only the structure (lengths adding up, known cell types) is
    checked, as a whole; a payload that fails raises :class:`CorruptionError`
    naming ``where``."""
    return decode_payloads(payloads, where)[0]


def payloads_to_table_py(payloads: Sequence[bytes], where: str = "WAL") -> pa.Table:
    """:func:`payloads_to_table` with NumPy over all records at once: the
    reference of the compiled ``wal_columns``, and what runs without it (or
    when it refuses a payload: this then raises the error)."""
    from ..cells import CELL_SCHEMA, EMPTY_CELLS

    counted = [(p, PAYLOAD_HEADER.unpack_from(p, 0)[1]) for p in payloads]
    payloads = [p for p, n in counted if n]
    if not payloads:
        return EMPTY_CELLS
    if sum(n for _, n in counted) >= _BIG_RECORDS * len(payloads):
        return _big_payloads_to_table(payloads, where)
    sizes = np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads))
    starts = np.zeros(len(payloads), dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    raw = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    counts = _gather_le(raw, starts + 8, "<u4").astype(np.int64)
    if (PAYLOAD_HEADER.size + 25 * counts > sizes).any():
        raise CorruptionError("WAL record claims more cells than its size holds", where, 0)
    total = int(counts.sum())
    record = np.repeat(np.arange(len(payloads)), counts)
    first = np.zeros(len(payloads), dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    j = np.arange(total) - first[record]  # index of each cell within its record
    base, n = starts[record], counts[record]
    timestamps = _gather_le(raw, base + PAYLOAD_HEADER.size + 8 * j, "<i8")
    lengths = [
        _gather_le(raw, base + PAYLOAD_HEADER.size + 8 * n + 4 * (k * n + j), "<u4").astype(np.int64)
        for k in range(4)
    ]
    types = raw[base + PAYLOAD_HEADER.size + 24 * n + j]
    # Each record holds its rows, families, qualifiers and values as four
    # contiguous blocks: label every byte of the log with its block kind once,
    # then each column's bytes are one boolean selection, in cell order.
    sums = np.stack([np.add.reduceat(lengths[k], first) for k in range(4)], axis=1)
    fixed = PAYLOAD_HEADER.size + 25 * counts
    if not np.array_equal(fixed + sums.sum(axis=1), sizes):
        raise CorruptionError("WAL record cell lengths do not add up to its size", where, 0)
    if not np.isin(types, np.fromiter(VALID_TYPES, dtype=np.uint8)).all():
        raise CorruptionError("WAL record holds an unknown cell type", where, 0)
    segments = np.concatenate([fixed[:, None], sums], axis=1).ravel()
    kinds = np.tile(np.array([4, 0, 1, 2, 3], dtype=np.uint8), len(payloads))
    label = np.repeat(kinds, segments)
    columns = [_binary(raw[label == k], lengths[k]) for k in range(4)]
    rows, families, qualifiers, values = columns
    return pa.Table.from_arrays(
        [rows, families, qualifiers, pa.array(timestamps), pa.array(types), values], schema=CELL_SCHEMA
    )


_BIG_RECORDS = 64  # cells per record from which records are decoded one by one


def _big_payloads_to_table(payloads: list[bytes], where: str) -> pa.Table:
    """:func:`payloads_to_table` for records of many cells: a few NumPy views
    and four contiguous slices per record, no copy of the log as a whole."""
    from ..cells import CELL_SCHEMA

    head = PAYLOAD_HEADER.size
    stamps, lengths, types = [], [], []
    blocks: list[list[memoryview]] = [[], [], [], []]
    for payload in payloads:
        n = PAYLOAD_HEADER.unpack_from(payload, 0)[1]
        if head + 25 * n > len(payload):
            raise CorruptionError("WAL record claims more cells than its size holds", where, 0)
        stamps.append(np.frombuffer(payload, "<i8", n, head))
        lens = np.frombuffer(payload, "<u4", 4 * n, head + 8 * n).reshape(4, n)
        lengths.append(lens)
        types.append(np.frombuffer(payload, np.uint8, n, head + 24 * n))
        view = memoryview(payload)
        pos = head + 25 * n
        for k in range(4):
            end = pos + int(lens[k].sum(dtype=np.int64))
            blocks[k].append(view[pos:end])
            pos = end
        if pos != len(payload):
            raise CorruptionError("WAL record cell lengths do not add up to its size", where, 0)
    all_types = np.concatenate(types)
    if not np.isin(all_types, np.fromiter(VALID_TYPES, dtype=np.uint8)).all():
        raise CorruptionError("WAL record holds an unknown cell type", where, 0)
    all_lengths = np.concatenate(lengths, axis=1).astype(np.int64)
    columns = [_binary(np.frombuffer(b"".join(blocks[k]), np.uint8), all_lengths[k]) for k in range(4)]
    rows, families, qualifiers, values = columns
    return pa.Table.from_arrays(
        [rows, families, qualifiers, pa.array(np.concatenate(stamps)), pa.array(all_types), values],
        schema=CELL_SCHEMA,
    )


def _gather_le(raw: np.ndarray, positions: np.ndarray, dtype: str) -> np.ndarray:
    """Little-endian integers of ``dtype`` starting at each byte position."""
    width = np.dtype(dtype).itemsize
    return raw[positions[:, None] + np.arange(width)].view(dtype).ravel()


def _binary(data: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary array of consecutive values of the given lengths in ``data``."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 1 << 31:
        raise InvalidArgument("WAL cells too large for one Arrow binary array")
    return pa.Array.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )
