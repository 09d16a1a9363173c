"""Merge sorted runs of ROWS (row batches, ``key`` first) that share no key.

A scan into rows that reads a memstore and store files needs no cell merge
when the sources hold different rows: each row of the result is a row of
exactly one source, so the sources' row batches (``key`` plus one column per
requested column, see :func:`storage.kernels.cells_to_rows`) only need to be
interleaved in key order.  :func:`merge_row_runs` does that on the keys
alone: they are encoded as fixed-width values whose order is the keys' byte
order (NumPy integers where they fit in 8 bytes), a stable NumPy sort of the
runs laid end to end merges the already sorted runs, and each column is then
gathered once (or, for runs of key ranges of their own, sliced).

A key found in more than one run ends the merge with None: such a row needs
its cells merged and resolved (versions, timestamps), which is the cell
path's work.  Nothing here loops over rows in Python.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidArgument
from ..native import NATIVE
from .cell_columns import UINT_BY_WIDTH, one_array, pool_empty, value_offsets
from .gather import reversed_rows
from .key_codes import int_key_codes, padded_values

__all__ = ["merge_row_runs", "row_order", "keys_disjoint", "order_keys", "join_keys"]

_USE_MODULE = object()
_MAX_JOINED = 64  # key columns the compiled join takes (join_sorted's runs)

_MAX_KEY_BYTES = 1024  # wider row keys are placed by an Arrow sort instead
_MAX_PIECES = 16  # a merged order of fewer contiguous pieces is built from slices, not gathered


def order_keys(keys: Sequence[pa.Array]) -> list[np.ndarray] | None:
    """Binary key arrays as NumPy arrays of one dtype whose order is the
    keys' byte order; None when the longest key is wider than
    ``_MAX_KEY_BYTES``.

    Keys of one common width are compared as they are.  Otherwise each key is
    zero-padded to the longest and followed by its length (one byte, or two
    for keys longer than 255 bytes, big endian), so that a key sorts before
    the longer keys it is a prefix of, trailing 0x00 bytes included
    (``b"a" < b"a\\x00" < b"a\\x00\\x01"``).  Encoded keys of at most 8
    bytes are read as big-endian unsigned integers (zero-padded on the
    right), which NumPy searches several times faster than byte strings;
    wider ones are ``S<width>`` strings (NumPy's ``S`` comparison ignores
    trailing zero bytes, which is safe here because every encoded key has
    the same width).
    """
    arrays = [one_array(k) for k in keys]
    lengths = [np.diff(value_offsets(a)) if len(a) else np.zeros(0, np.int32) for a in arrays]
    present = [ls for ls in lengths if len(ls)]
    longest = max((int(ls.max()) for ls in present), default=0)
    if longest > _MAX_KEY_BYTES:
        return None
    fixed = all(int(ls.min()) == longest for ls in present)
    if fixed and longest in UINT_BY_WIDTH:
        # one width of 1, 2, 4 or 8 bytes: the keys are big-endian integers as they are
        return [_fixed_ints(a, longest) for a in arrays]
    suffix = 0 if fixed else (1 if longest < 256 else 2)
    width = longest + suffix
    if width == 0:
        return [np.zeros(len(a), dtype=np.uint64) for a in arrays]  # every key empty: all equal
    as_int = width <= 8
    out = []
    for array in arrays:
        # each key, zeros, its length, and (read as an integer) zeros to 8 bytes: one matrix
        matrix = np.ascontiguousarray(padded_values(array, longest, suffix=suffix, row_width=8 if as_int else width))
        out.append(matrix.view(">u8").ravel() if as_int else matrix.view(f"S{width}").ravel())
    return out


def _fixed_ints(array: pa.Array, width: int) -> np.ndarray:
    """Keys of one width of 1, 2, 4 or 8 bytes as native unsigned integers in byte order."""
    first = int(value_offsets(array)[0]) if len(array) else 0
    data = np.frombuffer(array.buffers()[2], dtype=np.uint8)[first : first + width * len(array)] if len(array) else np.zeros(0, np.uint8)
    return data.view(">" + UINT_BY_WIDTH[width]).astype(UINT_BY_WIDTH[width])


def _check_runs(runs: Sequence[pa.RecordBatch | pa.Table]) -> list[pa.Table]:
    tables = []
    for i, run in enumerate(runs):
        table = pa.Table.from_batches([run]) if isinstance(run, pa.RecordBatch) else run
        if not isinstance(table, pa.Table):
            raise InvalidArgument(f"runs[{i}] must be a pyarrow RecordBatch or Table, got {type(run).__name__}")
        if table.schema.names[:1] != ["key"] or not pa.types.is_binary(table.schema.field(0).type):
            raise InvalidArgument(f"runs[{i}] must start with a binary column 'key', got {table.schema.names[:1]}")
        if i and not table.schema.equals(tables[0].schema):
            raise InvalidArgument(f"runs[{i}] has the columns {table.schema.names}, runs[0] {tables[0].schema.names}")
        tables.append(table)
    return tables


def _placement(keys: list[np.ndarray]) -> np.ndarray | None:
    """The merged order of runs of distinct sorted keys, as indices into the
    runs laid end to end; None when a key is in two runs.

    A stable NumPy sort of the runs laid end to end: it finds the sorted runs
    and merges them (about 0.13 ms for 66K 4-byte keys in two runs, a third
    of what placing one run in the other by ``searchsorted`` costs).

    A few keys of each smaller run are first looked up in the largest run: a
    table being updated (a memstore or a second file re-putting rows the base
    run holds) shares many keys, and one found ends the merge before the sort
    (about 0.3 ms a region of 83K keys saved; the sample costs microseconds).
    """
    if _sampled_shared(keys):
        return None
    joined = keys[0] if len(keys) == 1 else np.concatenate(keys)
    order = np.argsort(joined, kind="stable")
    ordered = joined[order]
    if len(ordered) > 1 and bool((ordered[1:] == ordered[:-1]).any()):
        return None
    return order


_SAMPLE_KEYS = 64  # keys of each smaller run looked up in the largest before a full merge


def _sampled_shared(keys: list[np.ndarray]) -> bool:
    """True when a sample of each smaller run's sorted keys finds one in the
    largest run (so a key is in two runs); False says nothing either way."""
    runs = [k for k in keys if len(k)]
    if len(runs) < 2:
        return False
    largest = max(range(len(runs)), key=lambda i: len(runs[i]))
    base = runs[largest]
    for i, run in enumerate(runs):
        if i == largest:
            continue
        sample = run[:: max(1, len(run) // _SAMPLE_KEYS)]
        at = np.searchsorted(base, sample)
        inside = at < len(base)
        if bool((base[at[inside]] == sample[inside]).any()):
            return True
    return False


def _sorted_placement(keys: list[pa.Array]) -> np.ndarray | None:
    """:func:`_placement` for keys too wide to encode: a stable Arrow sort of
    all keys, then a check of neighbours for a key in two runs."""
    joined = pa.concat_arrays(keys)
    order = pc.sort_indices(joined).to_numpy()
    ordered = joined.take(pa.array(order))
    if len(ordered) > 1 and pc.any(pc.equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1))).as_py():
        return None
    return order


def _order(key_arrays: list[pa.Array]) -> np.ndarray | None:
    encoded = order_keys(key_arrays)
    if encoded is None:
        return _sorted_placement(key_arrays)
    return _placement(encoded)


def row_order(keys: Sequence[pa.Array]) -> np.ndarray | None:
    """The merged order of sorted arrays of distinct keys, as indices into the
    arrays laid end to end; None when a key is in two of them."""
    arrays = [one_array(k) for k in keys]
    if sum(1 for k in arrays if len(k)) < 2:
        return np.arange(sum(len(k) for k in arrays), dtype=np.int64)
    return _order(arrays)


def keys_disjoint(keys: Sequence[pa.Array]) -> bool:
    """True when no key is in two of the sorted, distinct key arrays."""
    return row_order(keys) is not None


def merge_row_runs(
    newest_first: Sequence[pa.RecordBatch | pa.Table], *, descending: bool = False, order: np.ndarray | None = None
) -> pa.Table | None:
    """Row runs with one schema (first column ``key``, binary), each sorted
    by key without repeats, interleaved into one table in key order
    (``descending``: the reverse order, for reverse scans, in the same one
    gather); None when a key is in more than one run (its cells must then be
    merged and resolved).

    Runs that interleave in fewer than ``_MAX_PIECES`` contiguous pieces
    (one run's keys after another's) are laid end to end as slices, with no
    copy; otherwise each column is gathered once from all runs.  A key
    wider than ``_MAX_KEY_BYTES`` makes the placement an Arrow sort.
    ``order``: the runs' :func:`row_order`, when the caller has it already.
    """
    runs = [t for t in _check_runs(newest_first) if t.num_rows]
    if not runs:
        return _check_runs(newest_first)[0].slice(0, 0) if newest_first else None
    if len(runs) == 1:
        return _reversed(runs[0]) if descending else runs[0]
    if order is None:
        order = _order([one_array(t.column(0)) for t in runs])
        if order is None:
            return None
    both = pa.concat_tables(runs)
    if descending:
        return both.take(pa.array(order[::-1]))
    # where the merged order jumps from one run (or place) to another
    breaks = np.flatnonzero(order[1:] != order[:-1] + 1) + 1
    if len(breaks) < _MAX_PIECES:
        # runs that hold key ranges of their own (a memstore of recent keys
        # after the files' rows): zero-copy slices laid end to end
        starts = np.concatenate([[0], breaks])
        ends = np.append(breaks, len(order))
        return pa.concat_tables([both.slice(int(order[s]), int(e - s)) for s, e in zip(starts, ends)])
    # a gather straight from the chunks: cheaper (pyarrow 26) than concatenating them first
    return both.take(pa.array(order))


def _reversed(table: pa.Table) -> pa.Table:
    return reversed_rows(table)


def join_keys(keys: Sequence[pa.Array | pa.ChunkedArray], *, native=_USE_MODULE
              ) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """Where the rows of sorted, distinct key columns go in their union (the rows of several
    families joined on the key): ``(picks, index)``, ``picks`` each union key's position in
    the columns laid end to end (in the first column holding it), ``index[t]`` each union
    row's row of column ``t`` (-1: none); None for keys too wide to encode
    (:func:`order_keys`).

    Keys that read as uint64 codes (:func:`storage.kernels.key_codes.int_key_codes`: one width
    of 1, 2, 4 or 8 bytes, or wider under one lead) are joined by the compiled ``join_sorted``
    in one walk of the columns' heads; others, and every call when the kernels are off, by
    :func:`join_keys_py`, the reference, with the same answer.  ``native``: the compiled module
    to use (None: the reference; by default :data:`storage.native.NATIVE`)."""
    if native is _USE_MODULE:
        native = NATIVE
    arrays = [one_array(k) for k in keys]
    if native is not None and 0 < len(arrays) <= _MAX_JOINED:
        coded = int_key_codes(native, arrays, None)
        if coded is not None and coded[1].ndim == 1:
            codes = coded[1]
            bounds = np.zeros(len(arrays) + 1, dtype=np.int64)
            np.cumsum([len(a) for a in arrays], out=bounds[1:])
            n = len(codes)
            picks = pool_empty(n, np.int64)
            index = pool_empty((len(arrays), n), np.int64)
            rows = native.join_sorted(codes, bounds, picks, index)
            return picks[:rows], [index[t, :rows] for t in range(len(arrays))]
    return join_keys_py(arrays)


def join_keys_py(keys: Sequence[pa.Array]) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """:func:`join_keys` in NumPy, the reference: the columns' encoded keys laid end to end
    and stably sorted (each column is a sorted run, so the sort merges runs; equal keys keep
    the columns' order), a new union row wherever a key differs from the one before."""
    codes = order_keys(keys)
    if codes is None:
        return None
    joined = np.concatenate(codes)
    if not len(joined):
        return np.zeros(0, dtype=np.int64), [np.zeros(0, dtype=np.int64) for _ in codes]
    order = np.argsort(joined, kind="stable")
    ordered = joined[order]
    first = np.empty(len(order), dtype=bool)  # where a key differs from the one before: a new row
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    row_of = np.cumsum(first, dtype=np.int64)
    row_of -= 1
    rows = int(row_of[-1]) + 1
    placed = np.empty(len(order), dtype=np.int64)  # each key's row, in the columns' order
    placed[order] = row_of
    index, start = [], 0
    for c in codes:
        at = np.full(rows, -1, dtype=np.int64)
        at[placed[start:start + len(c)]] = np.arange(len(c), dtype=np.int64)
        index.append(at)
        start += len(c)
    return order[first].astype(np.int64, copy=False), index
