"""Sources as row pieces and markers: the input of :func:`resolve_rows`.

:func:`storage.kernels.resolve_rows.resolve_rows` resolves rows laid side by
side; this module lays them out, over whole arrays:

* a dense block (:class:`storage.storefile._dense.DenseBlock`: puts, one
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

from .cells import CellType
from .kernels._arrays import CellColumns, as_cell_table, group_ids
from .kernels.resolve_rows import ABSENT, Markers, RowPiece
from .storefile._dense import DenseBlock

__all__ = ["MAX_RANKS", "dense_piece", "CellSource", "join_markers"]

MAX_RANKS = 8
"""Most version ranks a source is laid out in (more go to the cell path)."""

_PUT = int(CellType.PUT)


def _absent(n: int) -> np.ndarray:
    return np.full(n, ABSENT, dtype=np.int64)


def dense_piece(dense: DenseBlock, qualifiers: Sequence[bytes]) -> RowPiece:
    """The piece of a dense block for ``qualifiers`` (a qualifier the block
    lacks is absent in every row)."""
    n = dense.num_rows
    where = {q: j for j, q in enumerate(dense.qualifiers)}
    plain = dense.plain_timestamps()
    ts, values = [], []
    for q in qualifiers:
        j = where.get(q)
        if j is None:
            ts.append(_absent(n))
            values.append(pa.nulls(n, pa.binary()))
            continue
        column = plain[j]
        if column.null_count:
            column = column.fill_null(ABSENT)
        ts.append(column.to_numpy(zero_copy_only=False))
        values.append(dense.values[j] if dense.values is not None else pa.nulls(n, pa.binary()))
    return RowPiece(dense.rows, ts, values)


class CellSource:
    """Sorted cells of one family split into markers and ranked puts.

    ``markers``: the source's delete markers (None without any).
    :meth:`pieces` lays the puts out as row pieces.
    """

    __slots__ = ("_puts", "markers", "_ranks", "_cache")

    def __init__(self, cells: pa.Table | pa.RecordBatch):
        table = as_cell_table(cells)
        types = CellColumns(table).numpy("type") if table.num_rows else np.zeros(0, np.uint8)
        is_put = types == _PUT
        self.markers: Markers | None = None
        if is_put.all():
            self._puts = table
        else:
            marks = table.filter(pa.array(~is_put))
            self.markers = Markers(
                marks.column("row").combine_chunks(), marks.column("qualifier").combine_chunks(),
                marks.column("timestamp").to_numpy(), marks.column("type").to_numpy(),
            )
            self._puts = table.filter(pa.array(is_put)) if is_put.any() else None
        self._ranks: np.ndarray | None = None
        self._cache: dict = {}

    def _rank(self) -> np.ndarray:
        """Each put's version rank in its column (0: the newest)."""
        if self._ranks is None:
            starts = CellColumns(self._puts).column_starts()
            ids = group_ids(starts)
            self._ranks = np.arange(len(starts)) - np.flatnonzero(starts)[ids]
        return self._ranks

    def pieces(self, qualifiers: Sequence[bytes], all_ranks: bool) -> list[RowPiece] | None:
        """The puts as pieces for ``qualifiers``: one per version rank, or
        only the newest rank unless ``all_ranks``; None when a column holds
        more than :data:`MAX_RANKS` versions and ``all_ranks`` asks for them."""
        puts = self._puts
        if puts is None or puts.num_rows == 0:
            return []
        key = (tuple(qualifiers), all_ranks)
        if key in self._cache:
            return self._cache[key]
        rank = self._rank()
        top = int(rank.max())
        if all_ranks and top >= MAX_RANKS:
            return None
        out = []
        for k in range(top + 1 if all_ranks else 1):
            chosen = rank == k
            layer = puts if top == 0 else puts.filter(pa.array(chosen))
            out.append(_layer_piece(layer, qualifiers))
        self._cache[key] = out
        return out


def _layer_piece(cells: pa.Table, qualifiers: Sequence[bytes]) -> RowPiece:
    """Puts holding at most one cell per row and column as one piece."""
    cols = CellColumns(cells)
    new_row = cols.row_starts()
    starts = np.flatnonzero(new_row)
    n_rows = len(starts)
    row_of = group_ids(new_row)
    keys = cols.take_binary("row", starts) if n_rows != cells.num_rows else cols.array("row")
    qid = pc.index_in(cols.array("qualifier"), value_set=pa.array(list(qualifiers), pa.binary()))
    qid = qid.fill_null(-1).to_numpy(zero_copy_only=False)
    stamps = cols.numpy("timestamp")
    values = cols.array("value")
    ts_out, values_out = [], []
    for j in range(len(qualifiers)):
        at = np.flatnonzero(qid == j)
        ts = _absent(n_rows)
        ts[row_of[at]] = stamps[at]
        src = np.zeros(n_rows, dtype=np.int64)
        src[row_of[at]] = at
        missing = ts == ABSENT
        ts_out.append(ts)
        values_out.append(values.take(pa.array(src, mask=missing)) if len(at) else pa.nulls(n_rows, pa.binary()))
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
