"""Skipping row groups whose value bounds cannot match a scan's filter.

A version 3 store file records in its block index, per dense block (row group) and value chunk
of fixed-width values, the least and greatest value compared as unsigned bytes.  Which qualifier
a chunk holds is not in the index but in the qualifier table that opens the block's key chunk:
of a block the scan reads, the key chunk is decoded once (and found by the scan in the block
cache); of a block it skips, only the qualifier table is read (:func:`_learn`).  A
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

An OR list of equalities of one column (an IN list, thousands of values from a join) is judged
with its values sorted, one binary search a block (:func:`_in_list_mask`), with the answer of
its members judged one by one.

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


def _one_column_equalities(filters: Sequence, family: bytes) -> bool:
    """Whether ``filters`` (an OR list's) are all ``=`` of one column of ``family`` with a
    ``BinaryComparator`` dropping rows without it: an IN list, as the connector pushes one."""
    if len(filters) < 2:
        return False
    qualifier = getattr(filters[0], "qualifier", None)
    for f in filters:
        if (not isinstance(f, SingleColumnValueFilter) or f.op is not CompareOperator.EQUAL
                or type(f.comparator) is not BinaryComparator or not f.filter_if_missing
                or f.family != family or f.qualifier != qualifier):
            return False
    return True


def _in_list_mask(filters: Sequence, n: int, stats: Stats) -> np.ndarray | None:
    """Per block: may a row pass one of ``filters`` (:func:`_one_column_equalities`), the OR of
    their :func:`_column_mask` found in one binary search a block among the sorted values
    instead of one comparison a value a block: a block is kept when some value lies in its
    ``[min, max]`` (a bound included), when it has no bounds, or when a value's width is not
    its bounds' (such values are read, as :func:`_column_mask` reads them)."""
    got = stats(filters[0].qualifier)
    if got is None:
        return None
    values = sorted({f.comparator.value for f in filters})
    widths = {len(v) for v in values}
    width = next(iter(widths)) if len(widths) == 1 else None
    mins, maxs = got
    mask = np.ones(n, dtype=bool)
    for i, (lo, hi) in enumerate(zip(mins, maxs)):
        if lo is None or hi is None or width is None or not len(lo) == len(hi) == width:
            continue
        k = bisect.bisect_left(values, lo)  # the least value >= lo
        mask[i] = k < len(values) and values[k] <= hi
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
        if _one_column_equalities(flt.filters, family):
            return _in_list_mask(flt.filters, n, stats)
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


# per store file reader (a file never changes): each block's qualifiers once learned (None: not yet),
# so a scan again over the same blocks reads no key chunk to learn which chunk holds a qualifier
_QUALIFIERS: "weakref.WeakKeyDictionary[object, list]" = weakref.WeakKeyDictionary()
# and each block's value-chunk bounds as the block index gives them, taken once (_UNREAD: not
# yet), so a scan again builds no per-block lists
_BOUNDS: "weakref.WeakKeyDictionary[object, list]" = weakref.WeakKeyDictionary()
_UNREAD = object()
_LOCK = threading.Lock()


def _known(reader) -> list:
    with _LOCK:
        return _QUALIFIERS.setdefault(reader, [None] * reader.block_count)


def _block_bounds(reader) -> list:
    with _LOCK:
        return _BOUNDS.setdefault(reader, [_UNREAD] * reader.block_count)


def _learn(reader, i: int, read_next: bool) -> tuple:
    """Block ``i``'s qualifiers (a ``DENSE`` block of a version 3 file), in chunk order, kept.

    The block index gives each value chunk's bounds but not whose values they are: the qualifier
    table that opens the block's key chunk says so
    (:meth:`~storage.storefile.reader.StoreFileReader.block_qualifiers`).  A block the scan reads
    next (``read_next``) has its key chunk decoded and cached, as the scan then finds it; of one
    it skips only the qualifier table is parsed and nothing is cached.  The reader's
    ``chunk_stats`` would decode every block's whole key chunk."""
    known = _known(reader)
    got = known[i]
    if got is not None:
        return got
    got = reader.block_qualifiers(i, decode_keys=read_next)
    if i and known[i - 1] == got:
        got = known[i - 1]  # blocks of the same columns share one tuple
    known[i] = got
    return got


def _position(quals: tuple, qualifier: bytes) -> int | None:
    """Where ``qualifier`` is in a block's (sorted) qualifiers, or None."""
    k = bisect.bisect_left(quals, qualifier)
    return k if k < len(quals) and quals[k] == qualifier else None


def _range_stats(reader, qualifier: bytes, first: int, last: int, guessed: np.ndarray | None):
    """Per block ``first``..``last``: ``(mins, maxs)`` of ``qualifier`` as the block index records
    them, None where the block lacks the qualifier or its chunk has no bounds (values of mixed
    widths, a ``CELLS`` block); a block none of whose chunks has bounds needs no qualifiers.

    With ``guessed`` (one flag per block of the range), a block whose qualifiers are not known yet
    is given those of the last block learned when it has as many value chunks, and flagged: the
    caller learns its own (:func:`_learn`) and judges it again.  Without, unknown blocks are
    learned as blocks read next."""
    known = _known(reader)
    block_bounds = _block_bounds(reader)
    lows: list = []
    highs: list = []
    ref = None
    for i in range(first, last + 1):
        lo = hi = None
        bounds = block_bounds[i]
        if bounds is _UNREAD:
            bounds = block_bounds[i] = reader.block_value_bounds(i)
        if bounds is not None:
            quals = known[i]
            if quals is None:
                if guessed is not None and ref is not None and len(ref) == len(bounds):
                    quals = ref
                    guessed[i - first] = True
                else:
                    quals = _learn(reader, i, True)
            ref = quals
            k = _position(quals, qualifier)
            if k is not None:
                lo, hi = bounds[k]
        lows.append(lo)
        highs.append(hi)
    return lows, highs


def _judge(filters, family: bytes, n: int, stats) -> np.ndarray | None:
    masks = [m for m in (block_mask(f, family, n, stats) for f in filters) if m is not None]
    return np.logical_and.reduce(masks) if masks else None


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

    # Blocks whose qualifiers are not known yet are judged first as if they held the columns of
    # the last block learned (a file's blocks mostly do), which only says how to learn theirs: a
    # block that would be read has its key chunk decoded for the scan, one that would be skipped
    # only its qualifier table read.  Every block is then judged on its own qualifiers.
    guessed = np.zeros(n, dtype=bool)
    seen: dict = {}  # one lookup per qualifier however many comparisons name it

    def stats(qualifier: bytes, exact: bool = False):
        key = (qualifier, exact)
        if key not in seen:
            seen[key] = _range_stats(reader, qualifier, first, last, None if exact else guessed)
        return seen[key]

    keep = _judge(filters, family, n, stats)
    if keep is None:
        return None
    if guessed.any():
        for j in np.flatnonzero(guessed).tolist():
            _learn(reader, first + j, bool(keep[j]))
        keep = _judge(filters, family, n, lambda q: stats(q, True))
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
