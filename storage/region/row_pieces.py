"""Sources as row pieces and markers: the input of :func:`resolve_rows`.

:func:`storage.kernels.resolve_rows.resolve_rows` resolves rows laid side by
side; this module lays them out, over whole arrays:

* a dense block (:class:`storage.storefile.dense.DenseBlock`: puts, one
  version per column) is one :class:`RowPiece` as it is (:func:`dense_piece`:
  the requested columns' timestamps and values, absent where the row lacks a
  column);
* cells (a cell-layout block, a memstore's cells at a read point, a decoded
  WAL: :class:`CellSource`) split into their delete markers and their puts;
  the puts become one piece per version rank (the newest version of every
  column, the second newest, ...), so that every piece still holds one cell
  per row and column.  A reader for which nothing can hide a put and no
  time range applies needs the newest rank only.

A source with more than :data:`MAX_RANKS` versions of some column (a counter
bumped many times in the memstore) is left to the cell path: ``pieces``
gives None.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import CellType
from ..kernels.cell_columns import CellColumns, as_cell_table, group_ids, one_array
from ..kernels.gather import gather_binary
from ..kernels.resolve_rows import ABSENT, Markers, RowPiece
from ..memstore.row_runs import dense_puts
from ..storefile.dense import DenseBlock

__all__ = ["MAX_RANKS", "dense_piece", "CellSource", "join_markers"]

MAX_RANKS = 8
"""Most version ranks a source is laid out in (more go to the cell path)."""

_PUT = int(CellType.PUT)


def _absent(n: int) -> np.ndarray:
    return np.full(n, ABSENT, dtype=np.int64)


def dense_piece(blocks: DenseBlock | Sequence[DenseBlock], qualifiers: Sequence[bytes]) -> RowPiece:
    """The piece of a dense block, or of consecutive dense blocks of one file
    laid end to end, for ``qualifiers`` (a qualifier a block lacks is absent
    in all its rows).  Values stay the blocks' arrays (a chunked array)."""
    blocks = [blocks] if isinstance(blocks, DenseBlock) else list(blocks)
    if len(blocks) == 1:
        keys = blocks[0].rows
    else:
        keys = pa.concat_arrays([d.rows for d in blocks])
    columns = _block_columns(blocks, qualifiers)
    ts, values = [], []
    for q, (stamps, chunks) in zip(qualifiers, columns):
        one = _one_stamp(stamps)
        if one is not None:
            # every row written at one timestamp (a run-end column of one run per block): a
            # read-only view of that value, no int64 per row (resolve_merge reads it once)
            ts.append(np.broadcast_to(np.int64(one), (len(keys),)))
            values.append(chunks[0] if len(chunks) == 1 else pa.chunked_array(chunks, pa.binary()))
            continue
        # one Arrow call per column for all blocks: the nulls of absent entries become ABSENT
        column = _plain(stamps, blocks, q)
        if column.null_count:
            column = column.fill_null(ABSENT)
        ts.append(column.to_numpy() if isinstance(column, pa.ChunkedArray) else column.to_numpy(zero_copy_only=False))
        values.append(chunks[0] if len(chunks) == 1 else pa.chunked_array(chunks, pa.binary()))
    return RowPiece(keys, ts, values)


def _block_columns(blocks: list, qualifiers: Sequence[bytes]) -> list[tuple[list, list]]:
    """Per qualifier, the blocks' timestamp and value arrays (nulls where a
    block lacks it).  The blocks of one file mostly share one qualifier list,
    so each block's positions are looked up only when its list changes."""
    columns: list[tuple[list, list]] = [([], []) for _ in qualifiers]
    known = at = None
    for d in blocks:
        if d.qualifiers != known:
            known, at = d.qualifiers, [_index(d, q) for q in qualifiers]
        stamps, values = d.timestamps, d.values
        for (ts, vs), j in zip(columns, at):
            if j is None:
                ts.append(pa.nulls(d.num_rows, pa.int64()))
                vs.append(pa.nulls(d.num_rows, pa.binary()))
            else:
                ts.append(stamps[j])
                vs.append(d.value(j) if values is not None else pa.nulls(d.num_rows, pa.binary()))
    return columns


_ONE_STAMP_BLOCKS = 8  # more blocks: checking each one's runs in Python costs more than decoding them


def _one_stamp(stamps: list) -> int | None:
    """The one timestamp of every row of the blocks' run-end encoded column ``stamps``
    (each block's one run, no nulls, the same value in all), else None."""
    if not stamps or len(stamps) > _ONE_STAMP_BLOCKS:
        return None
    one = None
    for t in stamps:
        if not pa.types.is_run_end_encoded(t.type) or t.offset != 0:
            return None
        if not len(t):
            continue
        values = t.values
        if values.null_count or t.run_ends[0].as_py() < len(t):
            return None
        value = values[0].as_py()
        if one is not None and value != one:
            return None
        one = value
    return one


def _plain(stamps: list, blocks: list, qualifier: bytes) -> pa.Array | pa.ChunkedArray:
    """The blocks' timestamps of one column as plain int64 (nulls where absent).

    Blocks store them run-length encoded; decoding them as one chunked array
    is one Arrow call where a call per block costs several microseconds each
    (hundreds of blocks in a chunk)."""
    if len(stamps) == 1:
        ts = stamps[0]
        return blocks[0].plain_timestamps()[blocks[0].qualifiers.index(qualifier)] \
            if pa.types.is_run_end_encoded(ts.type) else ts
    kind = stamps[0].type
    if pa.types.is_run_end_encoded(kind):
        try:  # Arrow checks that every block has this type: no Python step per block
            return pc.run_end_decode(pa.chunked_array(stamps, kind))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            pass
    plain = [pc.run_end_decode(t) if pa.types.is_run_end_encoded(t.type) else t for t in stamps]
    return pa.chunked_array(plain, pa.int64())


def _index(dense: DenseBlock, qualifier: bytes) -> int | None:
    try:
        return dense.qualifiers.index(qualifier)
    except ValueError:
        return None


def _pick(table: pa.Table, name: str, at: np.ndarray | None) -> pa.Array:
    """Binary column ``name`` of ``table`` as one array, at ``at`` (every cell when None)."""
    column = table.column(name)
    return one_array(column) if at is None else gather_binary(column, at)


class CellSource:
    """Sorted cells of one family split into markers and ranked puts.

    ``markers``: the source's delete markers (None without any).
    :meth:`pieces` lays the puts out as row pieces.  A source of markers and
    puts with one version per column (a flushed memstore of updates and
    deletes, a log of them) has the puts of the columns a read asks for
    pivoted into dense blocks, each value copied once from the cells' value
    column (:func:`dense_puts`): the general layout below took about 110 ns a
    cell, most of a scan of such a file.
    """

    __slots__ = ("_table", "_puts", "_put_at", "_dense", "markers", "_columns", "_ranks", "_row_ids", "_cache")

    def __init__(self, cells: pa.Table | pa.RecordBatch):
        table = self._table = as_cell_table(cells)
        columns = CellColumns(table)
        types = columns.numpy("type") if table.num_rows else np.zeros(0, np.uint8)
        is_put = types == _PUT
        puts = int(np.count_nonzero(is_put))  # one pass for "all puts" and "no put"
        self.markers: Markers | None = None
        # ``_put_at``: each put's position among the cells (None: every cell is a put); the
        # value column, the bulk of the cells, is never filtered: a piece gathers each value
        # once from it (Arrow's filter of every column cost 2.8 ms of a 28.6 ms scan of a
        # file of re-puts and deletes)
        self._put_at: np.ndarray | None = None
        self._puts: pa.Table | None = None  # the puts' columns but the values (made on first use)
        # with markers: the puts may pivot into dense blocks (dense_puts), per set of columns
        # asked for; False once they did not (several versions of a column, too sparse)
        self._dense: bool = False
        if puts == len(types):
            self._puts = table
        else:
            mark_at = None if not puts else np.flatnonzero(~is_put)
            stamps = columns.numpy("timestamp")
            self.markers = Markers(
                _pick(table, "row", mark_at), _pick(table, "qualifier", mark_at),
                stamps if mark_at is None else stamps[mark_at], types if mark_at is None else types[mark_at],
            )
            if puts:
                self._put_at = np.flatnonzero(is_put)
                self._dense = True
        self._columns: CellColumns | None = None
        self._ranks: np.ndarray | None = None
        self._row_ids: np.ndarray | None = None
        self._cache: dict = {}

    def _put_columns(self) -> pa.Table | None:
        """The puts' row, family, qualifier, timestamp and type columns (None: no put)."""
        if self._puts is None and self._put_at is not None:
            self._puts = self._table.drop_columns(["value"]).take(pa.array(self._put_at))
        return self._puts

    def qualifiers(self) -> list[bytes]:
        """The distinct qualifiers of the puts."""
        if self._puts is None and self._put_at is not None:  # (not laid out: their column alone)
            return pc.unique(_pick(self._table, "qualifier", self._put_at)).to_pylist()
        puts = self._put_columns()
        if puts is None or puts.num_rows == 0:
            return []
        return pc.unique(puts.column("qualifier")).to_pylist()

    def _dense_pieces(self, qualifiers: Sequence[bytes]) -> list[RowPiece] | None:
        """The puts of ``qualifiers`` as one dense piece ([] without any), or None when they
        do not pivot densely.  A row whose puts are all of other columns is left out: it has
        nothing a read of these columns shows (the columns' markers are the source's own)."""
        blocks = dense_puts(self._table, self._put_at, qualifiers)
        if blocks is None:
            return None
        return [dense_piece(blocks, qualifiers)] if blocks else []

    def _prepare(self) -> None:
        """Each put's version rank in its column (0: the newest) and row number."""
        cols = self._columns = CellColumns(self._put_columns())
        starts = cols.column_starts()
        self._ranks = np.arange(len(starts)) - np.flatnonzero(starts)[group_ids(starts)]
        self._row_ids = group_ids(cols.row_starts())

    def pieces(self, qualifiers: Sequence[bytes], all_ranks: bool) -> list[RowPiece] | None:
        """The puts as pieces for ``qualifiers``: one per version rank, or
        only the newest rank unless ``all_ranks``; None when a column holds
        more than :data:`MAX_RANKS` versions and ``all_ranks`` asks for them."""
        key = (tuple(qualifiers), all_ranks)
        if key in self._cache:
            return self._cache[key]
        if self._dense:  # one version of every column: the newest rank is all there is
            out = self._dense_pieces(qualifiers)
            if out is not None:
                self._cache[key] = out
                return out
            self._dense = False
        puts = self._put_columns()
        if puts is None or puts.num_rows == 0:
            return []
        if self._ranks is None:
            self._prepare()
        cols, rank = self._columns, self._ranks
        top = int(rank.max())
        if all_ranks and top >= MAX_RANKS:
            return None
        qid = pc.index_in(cols.array("qualifier"), value_set=pa.array(list(qualifiers), pa.binary()))
        qid = qid.fill_null(-1).to_numpy(zero_copy_only=False)
        out = []
        for k in range(top + 1 if all_ranks else 1):
            chosen = None if top == 0 else np.flatnonzero(rank == k)
            out.append(self._layer(chosen, qid, len(qualifiers)))
        self._cache[key] = out
        return out

    def _layer(self, chosen: np.ndarray | None, qid: np.ndarray, columns: int) -> RowPiece:
        """The puts at ``chosen`` (all when None; at most one per row and
        column) as one piece; each column's values gathered once."""
        cols = self._columns
        rows = self._row_ids if chosen is None else self._row_ids[chosen]
        new_row = np.empty(len(rows), dtype=bool)
        new_row[:1] = True
        np.not_equal(rows[1:], rows[:-1], out=new_row[1:])
        starts = np.flatnonzero(new_row)
        n_rows = len(starts)
        row_of = group_ids(new_row)
        first = starts if chosen is None else chosen[starts]
        keys = cols.take_binary("row", first) if len(first) != len(self._row_ids) else cols.array("row")
        q = qid if chosen is None else qid[chosen]
        stamps = cols.numpy("timestamp") if chosen is None else cols.numpy("timestamp")[chosen]
        cell_of = self._put_at  # a put's cell in the value column (None: the same position)
        ts_out, values_out = [], []
        for j in range(columns):
            at = np.flatnonzero(q == j)
            ts = _absent(n_rows)
            ts[row_of[at]] = stamps[at]
            if not len(at):
                ts_out.append(ts)
                values_out.append(pa.nulls(n_rows, pa.binary()))
                continue
            src = np.full(n_rows, -1, dtype=np.int64)  # -1: the row lacks the column (a null)
            picked = at if chosen is None else chosen[at]
            src[row_of[at]] = picked if cell_of is None else cell_of[picked]
            ts_out.append(ts)
            values_out.append(gather_binary(self._table.column("value"), src))
        return RowPiece(keys, ts_out, values_out)


def join_markers(parts: Sequence[Markers | None]) -> Markers | None:
    """The markers of several sources as one set (None without any)."""
    parts = [m for m in parts if m is not None and len(m)]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return Markers(
        pa.concat_arrays([m.rows for m in parts]), pa.concat_arrays([m.qualifiers for m in parts]),
        np.concatenate([m.ts for m in parts]), np.concatenate([m.types for m in parts]),
    )
