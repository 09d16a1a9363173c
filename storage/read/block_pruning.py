"""Skipping row groups whose value bounds cannot match a scan's filter.

A version 3 store file records, per dense block (row group) and value chunk of fixed-width
values, the least and greatest value compared as unsigned bytes
(:meth:`~storage.storefile.reader.StoreFileReader.chunk_stats`).  A
``SingleColumnValueFilter`` with a ``BinaryComparator`` (or ``BinaryPrefixComparator``)
compares stored bytes the same way, so a block whose ``[min, max]`` lies wholly outside what
the filter accepts holds no value that passes, and with ``filter_if_missing`` a row lacking
the column fails too: no row of the block can pass, and the block need not be read.

Where it is safe (each rule guards a silent wrong answer):

* only filters that drop a row lacking the column (``filter_if_missing``): a delete marker, a
  time range or a TTL can hide the stored value, and such a row would otherwise pass;
* only a region's one sorted run with nothing of the memstore in the scanned range
  (:func:`storage.read.batch_stream.streamable`): there every row, with its versions and
  markers, lies in one file, so no cell of a skipped block can shadow or delete a matching
  one elsewhere;
* rows cut across blocks are skipped only with every block they lie in;
* ``CELLS`` blocks and chunks without bounds (variable-width values) are always read, and so
  are chunks whose values have another width than a ``BinaryComparator``'s value;
* in an AND list the other members must be stateless (a ``PageFilter`` counts rows it sees);
  an OR list skips a block only when every member can.

A scan may also carry a ``prune`` filter (:attr:`~storage.read.region_plan.RegionReadPlan.prune`):
one that decides nothing about rows but lets the engine skip blocks, for a reader that tests
the decoded values itself (the Spark connector's typed comparisons).
"""

from __future__ import annotations

import bisect
import threading
import weakref
from typing import Callable, Sequence

import numpy as np

from ..filters import BinaryComparator, BinaryPrefixComparator, FilterList, SingleColumnValueFilter
from ..filters.compare import CompareOperator

__all__ = ["block_mask", "kept_ranges", "prunable"]

# (mins, maxs) of one qualifier over the blocks considered; None entries: no bounds
Stats = Callable[[bytes], "tuple[Sequence, Sequence] | None"]


def _interval_may_hold(op: CompareOperator, lo: bytes, hi: bytes, value: bytes) -> bool:
    """Whether some ``x`` with ``lo <= x <= hi`` (bytewise) may satisfy ``x <op> value``."""
    if op is CompareOperator.EQUAL:
        return lo <= value <= hi
    if op is CompareOperator.NOT_EQUAL:
        return not (lo == hi == value)
    if op is CompareOperator.LESS:
        return lo < value
    if op is CompareOperator.LESS_OR_EQUAL:
        return lo <= value
    if op is CompareOperator.GREATER:
        return hi > value
    if op is CompareOperator.GREATER_OR_EQUAL:
        return hi >= value
    return True  # NO_OP: left to the filter


def _column_mask(flt: SingleColumnValueFilter, family: bytes, n: int, stats: Stats) -> np.ndarray | None:
    """Per block: may a row pass ``flt``; None when the bounds cannot tell."""
    if (not flt.filter_if_missing or flt.family != family or flt.op is CompareOperator.NO_OP
            or type(flt.comparator) not in (BinaryComparator, BinaryPrefixComparator)):
        return None
    got = stats(flt.qualifier)
    if got is None:
        return None
    mins, maxs = got
    value = flt.comparator.value
    # a prefix comparison tests the values cut to the prefix's length: cutting keeps the order,
    # so the cut bounds bound the cut values
    cut = len(value) if type(flt.comparator) is BinaryPrefixComparator else None
    mask = np.ones(n, dtype=bool)
    for i, (lo, hi) in enumerate(zip(mins, maxs)):
        if lo is None or hi is None:
            continue  # no bounds recorded (or no chunk of the column): read the block
        if cut is None and not len(lo) == len(hi) == len(value):
            # values of another width than the compared one (a cell of another encoding under a
            # fixed-width type) are read, so that a reader decoding them sees them
            continue
        if cut is not None:
            lo, hi = lo[:cut], hi[:cut]
        mask[i] = _interval_may_hold(flt.op, lo, hi, value)
    return mask


def block_mask(flt, family: bytes, n: int, stats: Stats) -> np.ndarray | None:
    """Per block of ``n``: may any row of it pass ``flt`` (a storage filter), from the value
    bounds ``stats`` gives per qualifier; None when the bounds say nothing about ``flt``."""
    if isinstance(flt, SingleColumnValueFilter):
        return _column_mask(flt, family, n, stats)
    if isinstance(flt, FilterList) and flt.filters:
        if flt.operator.name == "MUST_PASS_ALL":
            if any(f.stateful for f in flt.filters):
                return None  # a skipped row would change what a stateful member counts
            masks = [m for m in (block_mask(f, family, n, stats) for f in flt.filters) if m is not None]
            if not masks:
                return None
            return np.logical_and.reduce(masks)
        masks = [block_mask(f, family, n, stats) for f in flt.filters]
        if any(m is None for m in masks):
            return None  # a member the bounds cannot judge may pass any block
        return np.logical_or.reduce(masks)
    return None


def prunable(flt) -> bool:
    """Whether ``flt`` has a part the value bounds could judge (cheap, no file read): scans
    whose filter has none skip the bounds lookup altogether."""
    if isinstance(flt, SingleColumnValueFilter):
        return flt.filter_if_missing and type(flt.comparator) in (BinaryComparator, BinaryPrefixComparator)
    if isinstance(flt, FilterList):
        return any(prunable(f) for f in flt.filters)
    return False


# per store file reader (a file never changes): qualifier -> (mins, maxs, known) over its blocks,
# filled block range by block range as scans ask, so a scan again over the same blocks reads no
# key chunk to learn which chunk holds the qualifier
_STATS: "weakref.WeakKeyDictionary[object, dict]" = weakref.WeakKeyDictionary()
_STATS_LOCK = threading.Lock()


def _file_stats(reader, qualifier: bytes, first: int, last: int) -> tuple[list, list] | None:
    """``reader.chunk_stats(qualifier)`` of blocks ``first``..``last``, kept per reader."""
    with _STATS_LOCK:
        per_file = _STATS.setdefault(reader, {})
        entry = per_file.get(qualifier)
        if entry is None:
            count = reader.block_count
            entry = per_file[qualifier] = ([None] * count, [None] * count, np.zeros(count, dtype=bool))
    mins, maxs, known = entry
    missing = np.flatnonzero(~known[first:last + 1])
    if missing.size:
        a, b = first + int(missing[0]), first + int(missing[-1])
        got = reader.chunk_stats(qualifier, first=a, last=b)
        if got is None:
            return None
        mins[a:b + 1], maxs[a:b + 1] = got
        known[a:b + 1] = True
    return mins[first:last + 1], maxs[first:last + 1]


def kept_ranges(reader, family: bytes, low: bytes, high: bytes | None,
                filters: Sequence) -> tuple[list[tuple[bytes, bytes | None]], int] | None:
    """The row ranges of ``[low, high)`` in ``reader``'s file left to read once the blocks no
    row of which can pass all of ``filters`` are skipped, and how many blocks were skipped;
    None when nothing is skipped (read ``[low, high)`` as it is).  The caller must read the
    file as part of a sorted run with no memstore rows in the range (see the module docstring)."""
    filters = [f for f in filters if f is not None and prunable(f)]
    starts = reader.block_row_starts
    count = reader.block_count
    if not filters or starts is None or count == 0 or getattr(reader, "format_version", 0) < 3:
        return None
    keys = reader.block_first_keys
    first = max(reader.find_block((low,)), 0)
    last = count - 1 if high is None else max(bisect.bisect_left(keys, (high,)) - 1, first)
    n = last - first + 1

    def stats(qualifier: bytes):
        return _file_stats(reader, qualifier, first, last)

    masks = [m for m in (block_mask(f, family, n, stats) for f in filters) if m is not None]
    if not masks:
        return None
    keep = np.logical_and.reduce(masks)
    # a row cut across blocks (its next block does not start a row) is skipped only with all of them
    piece = np.asarray(starts[first:last + 1]) > 0
    groups = np.cumsum(~piece)
    groups -= groups[0]  # the range's first block is in group 0, whether or not it starts a row
    group_keep = np.zeros(int(groups[-1]) + 1, dtype=bool)
    np.logical_or.at(group_keep, groups, keep)
    keep = group_keep[groups]
    if piece[0]:
        keep[groups == 0] = True  # the row began in a block before the range's: read it as it is
    skipped = int(n - keep.sum())
    if skipped == 0:
        return None
    ranges: list[tuple[bytes, bytes | None]] = []
    edges = np.flatnonzero(np.diff(np.concatenate(([0], keep.astype(np.int8), [0]))))
    for a, b in zip(edges[::2], edges[1::2]):  # kept blocks first + a .. first + b - 1
        lo = low if a == 0 else max(low, keys[first + a][0])
        end = first + b
        # past the range's last block the next block may begin with the end of a row: stop at high
        hi = high if end > last else keys[end][0]
        if high is not None and hi is not None:
            hi = min(hi, high)
        if hi is None or lo < hi:
            ranges.append((lo, hi))
    return ranges, skipped
