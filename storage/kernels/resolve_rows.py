"""Resolve ROWS of several sources: per row and column, the newest visible cell.

The row counterpart of :func:`storage.kernels.resolve` for a reader that
keeps one version per column (a rows scan, a major compaction to one
version).  Its input is what dense blocks hold: :class:`RowPiece` pieces,
each a run of distinct sorted row keys with, per column, a timestamp and a
value per row (absent where the row lacks the column), given newest source
first; plus the delete markers of every source (:class:`Markers`).  A source
holding several versions of a column gives one piece per version rank
(:mod:`storage.region.row_pieces` builds pieces from dense blocks and from cells).

How, over whole arrays:

* the pieces' keys are encoded in byte order
  (:func:`storage.kernels.row_merge.order_keys`) and one stable NumPy sort of
  them laid end to end (newest piece first) groups each row's entries, the
  newest source's first;
* markers are placed on the merged rows by ``searchsorted`` and reduced to
  the newest DeleteFamily per row and DeleteColumn per row and column
  (``np.maximum.at``); Delete markers are matched as (row, timestamp) pairs;
* per column the visible entries (present, inside the time range and TTL,
  not covered: :mod:`storage.kernels.rules`) compete: ``np.maximum.reduceat``
  gives each row's newest timestamp, and the first entry holding it (the
  newest source, on a tie) wins;
* rows left with no cell are dropped, and each column is gathered once.

Nothing loops over rows or cells in Python; the loops are over columns and
pieces.

Where the compiled kernels are built (:mod:`storage.native`), the common case
of a live table, several pieces or DeleteFamily markers without a timestamp
list, is resolved by one compiled pass instead (``resolve_merge``,
``storage/_native/resolve.c``): it merges the pieces' encoded keys, picks each
row's winner per column by the same rules and hands the gather its indices.
This NumPy path stays the reference and resolves what that pass does not take
(Delete and DeleteColumn markers, timestamp lists, more than 64 pieces).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import LATEST_TIMESTAMP, CellType
from ..errors import InvalidArgument
from .row_merge import order_keys
from .cell_columns import data_span, one_array, pool_empty, value_offsets
from ..native import NATIVE
from .gather import gather_binary
from .key_codes import code_keys, int_key_codes, keys_from_codes, lex_order, word_codes
from .rules import NO_MARKER, covered, effective_low, time_mask, unseen_markers

__all__ = ["ABSENT", "RowPiece", "Markers", "ResolvedRows", "resolve_rows", "merges_natively"]

ABSENT = NO_MARKER
"""The timestamp of an absent entry of a :class:`RowPiece` column (below every real timestamp)."""

_DELETE = int(CellType.DELETE)
_DELETE_COLUMN = int(CellType.DELETE_COLUMN)
_DELETE_FAMILY = int(CellType.DELETE_FAMILY)
_MAX_MERGED_PIECES = 64  # the compiled merge's limit (RS_MAX_PIECES in storage/_native/resolve.c)
_USE_MODULE = object()


@dataclass
class RowPiece:
    """Rows of one source (or one version rank of one source).

    ``keys``: binary row keys (a row may repeat only with other columns or
    timestamps: a row cut across blocks of one file).  ``ts[j]``: int64 per
    row for column ``j`` (:data:`ABSENT` where the row lacks it); a column
    whose rows share one timestamp may be a read-only zero-stride view of it
    (``np.broadcast_to``), which the compiled merge reads once.
    ``values[j]``: binary per row (anything where absent), an array or a
    chunked array.
    """

    keys: pa.Array
    ts: list
    values: list

    def __len__(self) -> int:
        return len(self.keys)


@dataclass
class Markers:
    """Delete markers of one family (any order): row keys, qualifiers
    (binary), timestamps (int64) and type codes (uint8)."""

    rows: pa.Array
    qualifiers: pa.Array
    ts: np.ndarray
    types: np.ndarray

    def __len__(self) -> int:
        return len(self.ts)

    def select(self, keep: np.ndarray) -> "Markers":
        """The markers where ``keep`` is True."""
        mask = pa.array(keep, type=pa.bool_())
        return Markers(self.rows.filter(mask), self.qualifiers.filter(mask), self.ts[keep], self.types[keep])


class ResolvedRows:
    """The rows a reader sees, ascending: ``keys``, and per column ``ts[j]``
    (int64, :data:`ABSENT` where the row has no visible cell; gathered on
    first use) and ``values[j]`` (binary, null there).

    A column's values may be given as ``(laid, winners)``, the values of the pieces laid end
    to end and each row's winning entry: they are gathered on first use (:meth:`value`), so a
    reader that drops rows first (:meth:`select`, a filter's row test) gathers only the rows
    it keeps."""

    __slots__ = ("keys", "_values", "_sources", "_laid", "_ts", "_cells", "_native")

    def __init__(self, keys: pa.Array, values: list, sources: list, laid: list, native=None):
        self.keys = keys
        self._values = list(values)  # per column: an array, or (laid values, winners) to gather
        self._sources = sources  # per column: the winning entry, -1 for none
        self._laid = laid  # per column: every entry's timestamp (an array, or one per piece)
        self._ts: list | None = None
        self._cells: int | None = None
        self._native = native  # the compiled module the gathers use (None: the reference)

    @property
    def num_rows(self) -> int:
        return len(self.keys)

    def value(self, j: int) -> pa.Array:
        """Column ``j``'s values, gathered now if they were left to gather."""
        v = self._values[j]
        if isinstance(v, tuple):
            laid, winners = v
            v = self._values[j] = one_array(gather_binary(laid, winners, native=self._native))
        return v

    @property
    def values(self) -> list:
        """Every column's values (each gathered now if it was left to gather)."""
        return [self.value(j) for j in range(len(self._values))]

    def select(self, keep: np.ndarray) -> "ResolvedRows":
        """The rows where ``keep`` (boolean per row) is true; values not yet gathered stay so."""
        at = np.flatnonzero(keep)
        values = []
        for v in self._values:
            if isinstance(v, tuple):
                values.append((v[0], v[1][at]))
            else:
                values.append(one_array(gather_binary(v, at, native=self._native)))
        return ResolvedRows(gather_binary(self.keys, at, native=self._native), values,
                            [src[at] for src in self._sources], self._laid, self._native)

    @property
    def ts(self) -> list:
        if self._ts is None:
            self._ts = [self.column_ts(j) for j in range(len(self._sources))]
        return self._ts

    def column_ts(self, j: int) -> np.ndarray:
        """Column ``j``'s timestamps alone (:attr:`ts` builds every column's)."""
        if self._ts is not None:
            return self._ts[j]
        src, laid = self._sources[j], _joined(self._laid[j])
        return np.where(src < 0, ABSENT, laid[np.where(src < 0, 0, src)])

    @property
    def nbytes(self) -> int:
        """Bytes held: the keys, values and per-column entry arrays (what a cache charges;
        every column is gathered first)."""
        total = self.keys.nbytes + sum(v.nbytes for v in self.values)
        laid = sum(sum(p.nbytes for p in a) if isinstance(a, list) else a.nbytes for a in self._laid)
        return total + sum(a.nbytes for a in self._sources) + laid

    def present(self, j: int) -> np.ndarray:
        """Boolean per row: column ``j`` has a visible cell."""
        return self._sources[j] >= 0

    def cell_count(self) -> int:
        """The visible cells of every row and column (counted once: a kept
        result is counted by every scan it serves)."""
        if self._cells is None:
            # a column's value is null exactly where no entry won: Arrow counts the validity
            # bitmap's bits of a gathered column (a compare of every row's entry over again
            # cost 0.4 ms a live scan); a column not gathered yet counts its winners
            self._cells = sum(int(np.count_nonzero(v[1] >= 0)) if isinstance(v, tuple) else len(v) - v.null_count
                              for v in self._values)
        return self._cells


def resolve_rows(
    pieces: Sequence[RowPiece],
    columns: int,
    markers: Markers | None = None,
    *,
    min_timestamp: int = 0,
    max_timestamp: int = LATEST_TIMESTAMP,
    ttl_cutoff: int | None = None,
    timestamps: Sequence[int] | None = None,
    qualifiers: Sequence[bytes] | None = None,
    keep_deleted_cells: str = "FALSE",
    native=_USE_MODULE,
) -> ResolvedRows | None:
    """The newest visible cell of every row and column of ``pieces`` (newest
    source first, ``columns`` columns each), rows without any dropped; None
    when a key is too wide to encode (the caller then resolves cells).

    ``markers`` hide what they cover in every piece; ``qualifiers`` (the
    columns' qualifiers, in column order) says which column a DeleteColumn
    or Delete marker names (required with such markers).  In a family with
    ``keep_deleted_cells`` (TRUE or TTL) the markers at or after
    ``max_timestamp`` do not act (:func:`storage.kernels.rules.unseen_markers`).

    Several pieces (or one with markers), without a timestamp list and with
    DeleteFamily markers only, are resolved by the compiled one-pass merge
    (``resolve_merge``, ``storage/_native/resolve.c``) where it is built;
    ``native``: the compiled module to use (None: the NumPy path, the
    reference; by default :data:`storage.native.NATIVE`, looked up at each
    call so that one process can run both paths).
    """
    if native is _USE_MODULE:
        native = NATIVE
    pieces = [p for p in pieces if len(p)]
    for i, p in enumerate(pieces):
        if len(p.ts) != columns or len(p.values) != columns:
            raise InvalidArgument(f"pieces[{i}] has {len(p.ts)} timestamp and {len(p.values)} value columns, not {columns}")
    if not pieces:
        none = np.zeros(0, np.int64)
        return ResolvedRows(pa.array([], pa.binary()), [pa.array([], pa.binary())] * columns,
                            [none] * columns, [none] * columns)
    if markers is not None and len(markers):
        unseen = unseen_markers(markers.ts, np.ones(len(markers), dtype=bool), max_timestamp, keep_deleted_cells)
        if unseen is not None:
            markers = markers.select(~unseen)
    if markers is not None and not len(markers):
        markers = None
    if native is not None and (len(pieces) > 1 or markers is not None) and timestamps is None \
            and _merges_compiled(len(pieces), markers):
        # keys of one width of 1, 2, 4 or 8 bytes (a counter, an id), or wider under one
        # prefix (a string id, a composite key): their integers are laid end to end for the
        # compiled merge straight from each piece's bytes, with no joined copy of the keys and
        # no second pass to widen them
        marker_keys = markers.rows if markers is not None else None
        coded = int_key_codes(native, [p.keys for p in pieces], marker_keys)
        if coded is not None:
            width, codes, marker_codes, lead = coded
            merged = _resolve_merged(native, pieces, columns, None, codes, markers, marker_codes,
                                     min_timestamp, max_timestamp, ttl_cutoff, code_width=width, code_lead=lead)
            if merged is not None:
                return merged
        else:
            # keys of several widths (YCSB's user and a hash): three words of the bytes they
            # differ in, where that is enough; the keys come out of the pieces, not the codes
            worded = word_codes(native, [p.keys for p in pieces], marker_keys)
            if worded is not None:
                merged = _resolve_merged(native, pieces, columns, pa.chunked_array([p.keys for p in pieces]),
                                         worded[0], markers, worded[1], min_timestamp, max_timestamp, ttl_cutoff)
                if merged is not None:
                    return merged
    all_keys = pa.concat_arrays([p.keys for p in pieces]) if len(pieces) > 1 else pieces[0].keys
    encoded = order_keys([all_keys] + ([markers.rows] if markers is not None else []))
    if encoded is None:
        return None
    joined = encoded[0]
    if native is not None and (len(pieces) > 1 or markers is not None) and timestamps is None:
        merged = _resolve_merged(native, pieces, columns, all_keys, joined, markers,
                                 encoded[-1] if markers is not None else None,
                                 min_timestamp, max_timestamp, ttl_cutoff)
        if merged is not None:
            return merged
    n = len(joined)
    # keys already strictly ascending (one source, or sources one after the
    # other): no sort and no gathers by the order
    identity = n < 2 or bool((joined[1:] > joined[:-1]).all())
    if identity:
        order = np.arange(n)
        ordered = joined
        starts = order
    else:
        order = np.argsort(joined, kind="stable")
        ordered = joined[order]
        new = np.empty(n, dtype=bool)
        new[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
        starts = np.flatnonzero(new)
    groups = _Groups(starts, n)

    family_newest = column_newest = point = None
    if markers is not None:
        family_newest, column_newest, point = _place_markers(
            ordered[starts], encoded[-1], markers, qualifiers, columns
        )
    ranged = (
        min_timestamp > 0 or max_timestamp != LATEST_TIMESTAMP or ttl_cutoff is not None or timestamps is not None
    )

    sources = []  # per column: index into the pieces laid end to end, -1 where no cell
    laid = []  # per column: the pieces' timestamps laid end to end
    for j in range(columns):
        ts_all = np.concatenate([p.ts[j] for p in pieces]) if len(pieces) > 1 else pieces[0].ts[j]
        laid.append(ts_all)
        ts = ts_all if identity else ts_all[order]
        visible = ts != ABSENT
        if visible.all():
            visible = None
        if ranged:
            inside = time_mask(ts, min_timestamp, max_timestamp, ttl_cutoff, timestamps)
            if inside is not None:
                visible = inside if visible is None else visible & inside
        if family_newest is not None:
            visible = _and_not(visible, covered(ts, family_newest[groups.ids()]))
        if column_newest is not None and column_newest[j] is not None:
            visible = _and_not(visible, covered(ts, column_newest[j][groups.ids()]))
        if point is not None and point[j] is not None:
            visible = _and_not(visible, _point_deleted(groups.ids(), ts, point[j]))
        sources.append(groups.winners(ts, visible, order))
    keep = None
    if columns:
        any_cell = sources[0] >= 0
        for src in sources[1:]:
            any_cell |= src >= 0
        if not any_cell.all():
            keep = np.flatnonzero(any_cell)
    chosen = starts if keep is None else starts[keep]
    keys = keys_from_codes(ordered[chosen]) if _int_keys(all_keys, joined, len(chosen)) \
        else gather_binary(all_keys, order[chosen], native=native)
    out_values = []
    for j, src in enumerate(sources):
        if keep is not None:
            src = sources[j] = src[keep]
        missing = src < 0
        values = _laid_values([p.values[j] for p in pieces])
        if identity and not missing.any():
            # entries in key order, each its row's cell: the kept ones, in place
            # (a gather by index gives one chunk: no second copy to combine the blocks' chunks);
            # the kept rows are long runs (deleted rows cut them): the compiled gather's case
            taken = values if keep is None else gather_binary(values, keep, native=native)
        else:
            # the winners: runs of one piece's consecutive rows (a re-put every few rows cuts
            # them), copied run by run where the compiled gather is built
            taken = gather_binary(values, src, native=native)
        out_values.append(one_array(taken))
    return ResolvedRows(keys, out_values, sources, laid)


def merges_natively(pieces: int) -> bool:
    """Will :func:`resolve_rows` merge ``pieces`` pieces of puts (no markers, no timestamp
    list) in the compiled one-pass merge (the extension built and not turned off)?"""
    return NATIVE is not None and _merges_compiled(pieces, None)


def _int_keys(all_keys: pa.Array, encoded: np.ndarray, count: int) -> bool:
    """Are the encodings ``encoded`` of ``all_keys`` the keys themselves (every
    key one width of 1, 2, 4 or 8 bytes), so that :func:`keys_from_codes`
    rebuilds ``count`` chosen keys from their integers instead of gathering them?"""
    dtype = encoded.dtype
    # on a little-endian machine only the one-width encoding is a native integer
    return sys.byteorder == "little" and dtype.kind == "u" and encoded.ndim == 1 and dtype.byteorder in ("=", "|") \
        and count > 0 \
        and data_span(all_keys) == len(all_keys) * dtype.itemsize


def _merges_compiled(pieces: int, markers: Markers | None) -> bool:
    """Whether the compiled merge takes a chunk of ``pieces`` pieces and ``markers``, whatever
    its keys: at most 64 pieces, DeleteFamily markers only.  The one place of these two rules
    (:func:`_resolve_merged`, :func:`merges_natively`); asked before a chunk's keys are read as
    integers, which a refused chunk would throw away."""
    return pieces <= _MAX_MERGED_PIECES and (markers is None or bool((markers.types == _DELETE_FAMILY).all()))


def _resolve_merged(native, pieces: list, columns: int, all_keys: pa.Array | None, joined: np.ndarray,
                    markers: Markers | None, marker_keys: np.ndarray | None, min_timestamp: int,
                    max_timestamp: int, ttl_cutoff: int | None, code_width: int | None = None,
                    code_lead: bytes = b"") -> ResolvedRows | None:
    """:func:`resolve_rows` by the compiled one-pass merge of the pieces' sorted
    keys (``joined``: their encodings laid end to end; ``marker_keys``: the
    markers'); None when it does not apply (Delete or DeleteColumn markers, a
    time bound outside int64, too many pieces, a key encoding it does not
    take): the NumPy path then resolves.  ``code_width``: every key is that many
    bytes and ``joined`` holds them as uint64 integers (``int_key_codes``; over 8
    bytes, each after ``code_lead``; no ``all_keys`` then: the keys are rebuilt from
    their integers)."""
    if not _merges_compiled(len(pieces), markers):
        return None
    int64 = np.iinfo(np.int64)
    ranged = min_timestamp > 0 or max_timestamp != LATEST_TIMESTAMP or ttl_cutoff is not None
    low = effective_low(min_timestamp, ttl_cutoff)
    if low > int64.max or max_timestamp < int64.min:
        return None
    bounded = max_timestamp <= int64.max
    width = _key_width(joined)
    if width is None:
        return None
    keys = joined
    if width == 0 and (joined.dtype != np.uint64 or not joined.flags.c_contiguous):
        keys = pool_empty(len(joined), np.uint64)  # as the output below: no fresh pages to fault in
        keys[:] = joined
    mkeys = mts = None
    if markers is not None:
        mkeys = np.ascontiguousarray(marker_keys, dtype=np.uint64) if width == 0 else marker_keys
        mts = np.ascontiguousarray(markers.ts, dtype=np.int64)
        if len(mkeys) > 1 and not _ascending(mkeys):
            at = lex_order(code_keys(mkeys))[0]
            mkeys, mts = np.ascontiguousarray(mkeys[at]), mts[at]
    # each piece's timestamps as they are (laid end to end only if a reader asks for them); a
    # column of one timestamp (a zero-stride view) passed as that one value
    laid = [[_stamps(p.ts[j]) for p in pieces] for j in range(columns)]
    n = len(joined)
    bounds = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in pieces], out=bounds[1:])
    out = pool_empty((columns + 1, n), np.int64)  # no page faults on a fresh mapping (see pool_empty)
    passed = [[t[:1] if _one_value(t) else t for t in column] for column in laid]
    rows, anchor, anchored, _ = native.resolve_merge(keys, width, bounds, passed, mkeys, mts, ranged,
                                                     max(low, int64.min), bounded, min(max_timestamp, int64.max), out)
    key_at = out[0, :rows]
    sources = [out[j + 1, :rows] for j in range(columns)]
    if anchored:  # every row is the base run's, in order (re-puts): its keys as they are
        keys_out = one_array(pieces[anchor].keys)
    elif code_width is not None:
        keys_out = keys_from_codes(joined[key_at], code_width, code_lead)
    elif _int_keys(all_keys, joined, rows):
        keys_out = keys_from_codes(joined[key_at])
    else:
        keys_out = gather_binary(all_keys, key_at, native=native)
    out_values = []
    for j, src in enumerate(sources):
        values = _laid_values([p.values[j] for p in pieces])
        if len(pieces) == 1 and rows == n and not (src < 0).any():
            # one piece, every entry its own row and its winner: the values in place
            out_values.append(one_array(values))
        else:
            out_values.append((values, src))  # gathered when first used (ResolvedRows.value)
    return ResolvedRows(keys_out, out_values, sources, laid, native)


def _ascending(codes: np.ndarray) -> bool:
    """Do ``codes`` (uint64 integers, or pairs or triples of words, the least significant
    first) not go down?"""
    if codes.ndim == 1:
        return bool((codes[1:] >= codes[:-1]).all())
    rising = codes[1:, 0] >= codes[:-1, 0]  # from the least significant word up
    for w in range(1, codes.shape[1]):
        rising = (codes[1:, w] > codes[:-1, w]) | ((codes[1:, w] == codes[:-1, w]) & rising)
    return bool(rising.all())


_PAIRS = -1
"""resolve_merge's key width for (low, high) uint64 pairs (``int_key_codes``)."""
_TRIPLES = -3
"""resolve_merge's key width for uint64 triples, the least significant first (``word_codes``)."""


def _stamps(ts: np.ndarray) -> np.ndarray:
    """A piece's timestamps of one column as int64: a one-value view (see :class:`RowPiece`) kept as it is."""
    return ts if _one_value(ts) and ts.dtype == np.int64 else np.ascontiguousarray(ts, dtype=np.int64)


def _one_value(ts: np.ndarray) -> bool:
    """Is ``ts`` one timestamp for every entry (a zero-stride view of one value)?"""
    return ts.ndim == 1 and len(ts) > 0 and ts.strides[0] == 0


def _key_width(encoded: np.ndarray) -> int | None:
    """The compiled merge's key form of ``encoded``: 0 for integers (passed as
    native uint64), :data:`_PAIRS` for (low, high) uint64 pairs, the width of fixed-width
    byte strings, None otherwise."""
    kind = encoded.dtype.kind
    if kind == "u" and encoded.ndim == 2:
        return {2: _PAIRS, 3: _TRIPLES}.get(encoded.shape[1])
    if kind == "u":
        return 0
    if kind == "S" and encoded.dtype.itemsize > 0:
        return encoded.dtype.itemsize
    return None


def _joined(laid) -> np.ndarray:
    """One column's timestamps of every piece laid end to end (given whole or one array per piece)."""
    if not isinstance(laid, list):
        return laid
    return laid[0] if len(laid) == 1 else np.concatenate(laid)


def _and_not(visible: np.ndarray | None, hidden: np.ndarray) -> np.ndarray:
    return ~hidden if visible is None else visible & ~hidden


def _laid_values(parts: list):
    """The pieces' values of one column laid end to end, without a copy: one
    piece's as they are, several as one chunked array (joined by Arrow from
    one-column tables: listing the chunks of block-sized chunked arrays in
    Python costs twice as much)."""
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables([pa.table([p], names=["v"]) for p in parts]).column(0)


class _Groups:
    """The merged rows: entries (positions in key order) grouped by key.

    Most rows of a chunk are in one source only; the winner search runs on
    the entries of rows held by several and takes the others as they are.
    """

    def __init__(self, starts: np.ndarray, n: int):
        self.starts = starts
        self.n = n
        self._ids = None
        self._lead = None  # the first entry of every group
        self._pair = None  # the two entries of every row held twice
        sizes = np.diff(np.append(starts, n))
        self.multi = np.flatnonzero(sizes > 1)  # groups of several entries
        self.pairs = False
        if len(self.multi):
            m_sizes = sizes[self.multi]
            # the usual case: a row in two sources (a memstore and a file)
            self.pairs = int(m_sizes.max()) == 2
            if not self.pairs:
                self.m_entries = np.flatnonzero(np.repeat(sizes > 1, sizes))  # their entries, in order
                self.m_starts = np.concatenate([[0], np.cumsum(m_sizes)[:-1]])
                self.m_sizes = m_sizes
                self.m_of = np.repeat(np.arange(len(self.multi)), m_sizes)  # entry -> its multi group

    def ids(self) -> np.ndarray:
        """The group of every entry."""
        if self._ids is None and len(self.starts) == self.n:
            self._ids = self.starts  # every entry its own group: 0, 1, 2, ...
        if self._ids is None:
            step = np.zeros(self.n, dtype=np.int64)
            step[self.starts[1:]] = 1
            self._ids = np.cumsum(step)
        return self._ids

    def winners(self, ts: np.ndarray, visible: np.ndarray | None, order: np.ndarray) -> np.ndarray:
        """Per group, the entry (index into the pieces laid end to end) of its
        newest visible cell, the first such on a tie; -1 where none is visible
        (``visible`` None: every entry is)."""
        if len(self.starts) == self.n:
            return order.copy() if visible is None else np.where(visible, order, -1)
        if self._lead is None:
            self._lead = order[self.starts]
        lead = self._lead
        src = lead.copy() if visible is None else np.where(visible[self.starts], lead, -1)
        if not len(self.multi):
            return src  # right for groups of one entry
        if self.pairs:
            if self._pair is None:
                a = self.starts[self.multi]
                self._pair = (a, a + 1, order[a], order[a + 1])
            a, b, at_a, at_b = self._pair
            # the first (newer) entry wins unless only the second is visible or it is newer
            if visible is None:
                src[self.multi] = np.where(ts[b] > ts[a], at_b, at_a)
            else:
                va, vb = visible[a], visible[b]
                take_b = vb & (~va | (ts[b] > ts[a]))
                src[self.multi] = np.where(take_b, at_b, np.where(va, at_a, -1))
            return src
        at = self.m_entries
        t = ts[at]
        v = np.ones(len(at), dtype=bool) if visible is None else visible[at]
        candidates = np.where(v, t, ABSENT)
        best = np.maximum.reduceat(candidates, self.m_starts)
        win = np.flatnonzero(v & (candidates == np.repeat(best, self.m_sizes)))
        src[self.multi] = -1
        if len(win):
            g = self.m_of[win]
            first = np.empty(len(win), dtype=bool)
            first[0] = True
            np.not_equal(g[1:], g[:-1], out=first[1:])
            win = win[first]
            src[self.multi[g[first]]] = order[at[win]]
        return src


def _place_markers(row_keys: np.ndarray, marker_keys: np.ndarray, markers: Markers, qualifiers, columns: int):
    """Markers on the merged rows: the newest DeleteFamily per row, the newest
    DeleteColumn per row of each column, the Delete (row, timestamp) pairs of
    each column; None for a kind (or a column) without markers."""
    pos = np.searchsorted(row_keys, marker_keys)
    inside = pos < len(row_keys)
    found = np.zeros(len(marker_keys), dtype=bool)
    found[inside] = row_keys[pos[inside]] == marker_keys[inside]
    types, ts = markers.types, markers.ts
    family_newest = None
    is_family = found & (types == _DELETE_FAMILY)
    if is_family.any():
        family_newest = np.full(len(row_keys), NO_MARKER, dtype=np.int64)
        np.maximum.at(family_newest, pos[is_family], ts[is_family])
    column_newest = point = None
    named = found & ((types == _DELETE_COLUMN) | (types == _DELETE))
    if named.any():
        if qualifiers is None or len(qualifiers) != columns:
            raise InvalidArgument("resolve_rows: column markers need the columns' qualifiers")
        column_newest, point = [None] * columns, [None] * columns
        for j, qualifier in enumerate(qualifiers):
            same = pc.equal(markers.qualifiers, pa.scalar(qualifier, pa.binary()))
            mine = named & same.to_numpy(zero_copy_only=False)
            if not mine.any():
                continue
            whole = mine & (types == _DELETE_COLUMN)
            if whole.any():
                newest = np.full(len(row_keys), NO_MARKER, dtype=np.int64)
                np.maximum.at(newest, pos[whole], ts[whole])
                column_newest[j] = newest
            one = mine & (types == _DELETE)
            if one.any():
                point[j] = (pos[one], ts[one])
    return family_newest, column_newest, point


def _point_deleted(group: np.ndarray, ts: np.ndarray, pairs) -> np.ndarray:
    """Entries whose (row, timestamp) is a Delete marker's."""
    rows, stamps = pairs
    known = np.unique(stamps)
    at = np.searchsorted(known, ts)
    at_ok = at < len(known)
    hit = np.zeros(len(ts), dtype=bool)
    hit[at_ok] = known[at[at_ok]] == ts[at_ok]
    if not hit.any():
        return hit
    width = np.int64(len(known))
    wanted = rows.astype(np.int64) * width + np.searchsorted(known, stamps)
    candidates = group[hit].astype(np.int64) * width + at[hit]
    hit[hit] = np.isin(candidates, wanted)
    return hit
