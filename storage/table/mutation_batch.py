"""happybase's ``Table.batch()``: mutations collected and sent together.

A batch is sent as one group per region: one WAL record and one insert into
the memstore (a sorted merge, see :mod:`storage.memstore.bulk_insert`), one
sync.  Puts without an explicit timestamp take one "now" per sent group,
read at its first put, as HBase stamps a whole batch of mutations with one
server time.
"""

from __future__ import annotations

from typing import Iterable

from .. import clock
from ..cells import Cell, CellType
from ..errors import InvalidArgument
from .arguments import MAX_ROW_KEY_LENGTH
from .writes import TableWriter

__all__ = ["Batch"]

_PUT = int(CellType.PUT)
_NO_LIMIT = 1 << 62


class Batch:
    """Collects puts and deletes and sends them together; usable as a context manager.

    ``batch_size`` sends automatically every that many mutations.  With
    ``transaction=True`` nothing is sent if the ``with`` block raises.
    """

    def __init__(self, writer: TableWriter, timestamp: int | None, batch_size: int | None, transaction: bool):
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise InvalidArgument(f"batch_size must be a positive int, got {batch_size!r}")
        if transaction and batch_size is not None:
            raise InvalidArgument("transaction and batch_size cannot be combined")
        if timestamp is not None:
            writer.check_timestamp(timestamp)
        self._writer = writer
        self._timestamp = timestamp
        self._batch_size = batch_size
        self._transaction = transaction
        self._cells: list[Cell] = []
        self._count = 0
        self._send_at = _NO_LIMIT if batch_size is None else batch_size  # mutations that trigger a send
        self._now: int | None = timestamp  # the timestamp of this group's puts

    def put(self, row: bytes, data: dict, wal: bool = True) -> None:
        """Add a put of ``data`` (``{b"cf:q": value}``) to ``row``."""
        cells = self._cells
        known = self._writer.known_columns  # column name -> (family, qualifier), filled by checked puts
        ts = self._now
        limit = self._writer.max_cell_size or _NO_LIMIT
        if (ts is not None and type(row) is bytes and row and type(data) is dict and data
                and len(row) <= MAX_ROW_KEY_LENGTH):
            # the common case without a call per cell: known columns, bytes values within the limits
            mark = len(cells)
            for name, value in data.items():
                hit = known.get(name)
                if hit is None or type(value) is not bytes or len(value) + len(row) + len(name) > limit:
                    del cells[mark:]  # something to check or refuse: the checked path below
                    break
                cells.append((row, hit[0], hit[1], ts, _PUT, value))
            else:
                # _added, inlined: one Python call less per put
                self._count = count = self._count + 1
                if count >= self._send_at:
                    self.send()
                return
        if ts is None:
            ts = self._now = clock.now_ms()
        cells.extend(self._writer.put_cells(row, data, ts))
        self._added()

    def delete(self, row: bytes, columns: Iterable | None = None, wal: bool = True) -> None:
        self._cells.extend(self._writer.delete_cells(row, columns, self._timestamp))
        self._added()

    def _added(self) -> None:
        self._count += 1
        if self._count >= self._send_at:
            self.send()

    def send(self) -> None:
        """Write what was collected."""
        cells, self._cells, self._count = self._cells, [], 0
        self._now = self._timestamp
        self._writer.write(cells)

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._transaction and exc_type is not None:
            return
        self.send()
