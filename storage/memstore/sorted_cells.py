"""Sorted cells: an immutable run of cells in Arrow, read like a memstore view.

What a reader builds from a log (the connector's pinned-snapshot reader
replays a region's WAL records, :meth:`SortedCells.from_payloads`): a log of
puts of one family in cell order goes straight to its row form, with its cell
table decoded only if asked for (with row deletes among the puts, the row form
and the deletes beside it: :meth:`SortedCells.rows_and_markers`); any other log
is decoded into one cell table
(:func:`storage.wal.arrow_decode.decode_payloads`) that :meth:`SortedCells.from_log`
sorts into cell order once, dropping overwritten cells (the last write of a key
wins, as in the memstore).  Scans then slice it per row range.
"""

from __future__ import annotations

from typing import Callable

import pyarrow as pa

from ..cells import EMPTY_CELLS, Cell
from ..kernels import is_clean, is_sorted
from ..kernels.cell_columns import CellColumns
from ..kernels.merge import rows_in, sort_log
from ..wal.arrow_decode import LogShape, decode_payloads
from .row_runs import RowRun, log_rows

__all__ = ["SortedCells"]


class SortedCells:
    """Cells in cell order with the read methods of :class:`storage.memstore.write_buffer.MemStoreView`."""

    read_point = None  # everything in it is visible

    def __init__(self, table: pa.Table | None, cells: int | None = None, decode: Callable[[], pa.Table] | None = None):
        # table None: built on first use by decode() (a log read as rows only: from_payloads)
        self._table = table
        self._decode = decode
        self._count = table.num_rows if table is not None else cells
        self._clean: bool | None = None
        self._row_run: RowRun | None = None
        self._row_run_built = False
        self._shared = False  # served to more than one read (share())
        self._families: dict[bytes, SortedCells] = {}
        self._family: bytes | None = None  # the one family of every cell, when known
        self._as_rows = False  # came as rows (from_payloads): the cells are rebuilt from them
        self._marked: tuple[RowRun, pa.Table] | None = None  # came as rows and markers set aside (from_payloads)

    @property
    def table(self) -> pa.Table:
        """The cells as one table (decoded from the log on first use when the
        cells came as rows: :meth:`from_payloads`)."""
        table = self._table
        if table is None:
            # two readers of shared cells may both decode (the same cells, one kept); a
            # reader that finds decode gone finds the table set before it went
            decode = self._decode
            table = self._table if decode is None else decode()
            self._table, self._decode = table, None
        return table

    @classmethod
    def from_payloads(cls, payloads: list, where: str = "WAL") -> "SortedCells":
        """The cells of checked WAL record payloads given in log order (what a
        pinned region replays).  A log of puts of whole rows of one family (a
        table being updated, its rows in key order or, with hashed or salted
        keys, in none) becomes its row form straight from the payloads
        (:func:`storage.memstore.row_runs.log_rows`), and its cell table is
        rebuilt from the rows only if something asks for cells; row deletes
        among the puts are set aside beside the row form
        (:meth:`rows_and_markers`; the log is then not clean and has no
        :meth:`row_run`); any other log is decoded into a cell table and sorted
        (:meth:`from_log`).  Nothing
        returned refers to ``payloads``: they may be views of a WAL file's
        memory map (:class:`storage.wal.reader.WalReader`)."""
        rows = log_rows(payloads, markers_aside=True)
        if rows is None:
            return cls.from_log(*decode_payloads(payloads, where))
        run, family, count, markers = rows
        if markers is not None:
            # puts among DeleteFamily markers (a table being updated and deleted from): the
            # puts' row form and the markers, each in key order; a read resolves the two as
            # it resolves any source of both (storage.region.row_resolve.memstore_items), and
            # the cells, if something asks for them, are the two merged into cell order
            def both() -> pa.Table:
                puts = pa.Table.from_batches([run.dense.cells(family)])
                return sort_log(pa.concat_tables([puts, markers])).combine_chunks()

            cells = cls(None, count, both)
            cells._clean, cells._family = False, family
            cells._row_run, cells._row_run_built, cells._as_rows = None, True, True
            cells._marked = (run, markers)
            return cells
        # the cells rebuilt from the rows, not from the payloads: the payloads may be views
        # of the WAL's memory map, which the cells must not keep (nor a kept replay hold
        # the log's bytes beside its rows); the rows are all puts of one family, one cell
        # per column, in cell order, so they hold every field of every cell
        cells = cls(None, count, lambda: pa.Table.from_batches([run.dense.cells(family)]))
        cells._clean, cells._family = True, family
        cells._row_run, cells._row_run_built, cells._as_rows = run, True, True
        return cells

    @classmethod
    def from_log(cls, cells: pa.Table, shape: LogShape | None = None) -> "SortedCells":
        """Sort cells given in write order, keeping the last write of each key.
        ``shape``: what the log's decode already knows of them (None: nothing),
        so neither their order nor their cleanness is looked at again."""
        if cells.num_rows == 0:
            return cls(EMPTY_CELLS)
        if shape is not None and shape.sorted:
            known = cls(cells)
            known._clean = shape.clean
            known._family = shape.family
            return known
        if shape is None and is_sorted(cells, strict=True):  # (a shape that says unsorted is not checked again)
            return cls(cells)  # written in key order without overwrites (appends): nothing to do
        return cls(sort_log(cells).combine_chunks())

    def family(self, family: bytes) -> "SortedCells":
        """The cells of one family (still in cell order); the same object on
        every call once the cells are shared."""
        if self._count == 0:
            return self
        known = self._families.get(family) if self._shared else None
        if known is not None:
            return known  # kept cells: no pass over them again
        if family == self._family:
            return self  # the decode saw one family in the whole log: no pass over the cells
        if self._family is not None:
            part = SortedCells(EMPTY_CELLS)  # every cell is of the one other family
        else:
            mask = CellColumns(self.table).equals("family", family)
            # a log of one family (the usual case) is its own family: no copy
            part = self if mask.all() else SortedCells(self.table.filter(pa.array(mask)))
        if self._shared:
            part.share()
            part = self._families.setdefault(family, part)  # two threads at once: one object
        return part

    def share(self) -> None:
        """Mark the cells as served to every read of the same pinned WAL records
        (:mod:`storage.region.replay_memo` keeps them): from now on they and
        their families are anchors for results kept under them."""
        self._shared = True

    def anchors(self) -> tuple | None:
        """``(self,)`` once shared: the same object means the same cells, for
        a result kept between reads (:mod:`storage.read.chunk_memo`); None
        before, as a log decoded for one read only can never serve another
        (see :meth:`storage.memstore.runs.MemStoreView.anchors`)."""
        return (self,) if self._shared else None

    def kept_bytes(self) -> int:
        """What keeping these cells between reads costs: twice the cells' bytes (the
        cells, and the row form a scan builds from them once); for cells that came as
        rows (:meth:`from_payloads`), twice the row form's, without decoding the cells."""
        if self._marked is not None:
            run, markers = self._marked
            return 2 * (run.dense.nbytes + markers.nbytes)
        if self._as_rows:  # the same charge before and after the cells are decoded
            return 2 * self._row_run.dense.nbytes
        return 2 * self.table.nbytes

    def is_empty(self) -> bool:
        """True when there is no cell."""
        return self._count == 0

    def is_clean(self) -> bool:
        """True when every cell is a put and no column has two versions."""
        if self._clean is None:
            self._clean = is_clean(self.table)
        return self._clean

    def row_run(self) -> RowRun | None:
        """The cells as rows, built once; None when they are not clean."""
        if not self._row_run_built:
            # the row form exists only for clean cells: no separate is_clean() pass, but a
            # log its decode saw to hold markers or versions (a table being deleted from)
            # is not pivoted only to be refused
            self._row_run = None if self._clean is False else RowRun.of(self.table, one_family=self._family is not None)
            self._row_run_built = True
        return self._row_run

    def holds_rows(self, start_row: bytes = b"", stop_row: bytes | None = None) -> bool:
        """Whether a cell's row is in ``[start_row, stop_row)``: told from the row form
        when the cells came as rows, without decoding them."""
        if self._count == 0:
            return False
        if self._table is None and self._row_run is not None:
            return self._row_run.slice(start_row, stop_row) is not None
        if self._table is None and self._marked is not None:
            run, markers = self._marked
            return run.slice(start_row, stop_row) is not None or rows_in(markers, start_row, stop_row).num_rows > 0
        return self.to_batch(start_row, stop_row).num_rows > 0

    def rows_and_markers(self) -> "tuple[RowRun, pa.Table] | None":
        """The puts' row form and the DeleteFamily markers beside it (a cell table in cell
        order), when the cells came so from a log (:meth:`from_payloads`); else None."""
        return self._marked

    def to_batch(self, start_row: bytes = b"", stop_row: bytes | None = None) -> pa.Table:
        """The cells of rows ``[start_row, stop_row)`` (a zero-copy slice)."""
        return rows_in(self.table, start_row, stop_row)

    def row_cells(self, row: bytes) -> list[Cell]:
        """The cells of one row, as tuples (a point read)."""
        part = self.to_batch(row, row + b"\x00")
        return [Cell(*c.values()) for c in part.to_pylist()]

    def scanner(self, metrics=None):
        """A cell scanner over the cells (the cell path; builds a memstore of them)."""
        from .write_buffer import MemStore

        store = MemStore()
        if self.table.num_rows:
            store.add_many([Cell(*c.values()) for c in self.table.to_pylist()], trusted=True)
        return store.scanner(metrics)
