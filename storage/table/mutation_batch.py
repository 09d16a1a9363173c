"""happybase's ``Table.batch()``: mutations collected and sent together."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ..cells import Cell
from ..errors import InvalidArgument

if TYPE_CHECKING:
    from .table import Table

__all__ = ["Batch"]


class Batch:
    """Collects puts and deletes and sends them together; usable as a context manager.

    ``batch_size`` sends automatically every that many mutations.  With
    ``transaction=True`` nothing is sent if the ``with`` block raises.
    """

    def __init__(self, table: Table, timestamp: int | None, batch_size: int | None, transaction: bool):
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise InvalidArgument(f"batch_size must be a positive int, got {batch_size!r}")
        if transaction and batch_size is not None:
            raise InvalidArgument("transaction and batch_size cannot be combined")
        self._table = table
        self._timestamp = timestamp
        self._batch_size = batch_size
        self._transaction = transaction
        self._cells: list[Cell] = []
        self._count = 0

    def put(self, row: bytes, data: dict, wal: bool = True) -> None:
        self._cells.extend(self._table._put_cells(row, data, self._timestamp))
        self._added()

    def delete(self, row: bytes, columns: Iterable | None = None, wal: bool = True) -> None:
        self._cells.extend(self._table._delete_cells(row, columns, self._timestamp))
        self._added()

    def _added(self) -> None:
        self._count += 1
        if self._batch_size is not None and self._count >= self._batch_size:
            self.send()

    def send(self) -> None:
        """Write what was collected."""
        cells, self._cells, self._count = self._cells, [], 0
        self._table._write(cells)

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._transaction and exc_type is not None:
            return
        self.send()
