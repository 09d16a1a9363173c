"""Point reads of a table: one row, a list of rows, the versions of one cell."""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterator, Sequence

from ..columns import parse_column
from ..errors import InvalidArgument
from ..region.region import Region
from ..scanner import ScanSpec
from .arguments import _check_bytes


class TableGets:
    """``row``, ``rows`` and ``cells`` of a :class:`~storage.table.table.Table`."""

    def row(self, row: bytes, columns: Sequence[bytes] | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> dict:
        """One row as ``{b"cf:q": value}`` ({} if absent); a cell-path point read."""
        row = _check_bytes(row, "row key")
        columns = self._scan_columns(columns)
        _, max_ts = self._time_bounds(timestamp, None)
        spec = ScanSpec(start_row=row, stop_row=row + b"\x00", columns=columns, max_timestamp=max_ts) if max_ts else None
        if spec is None:
            return {}
        ((view, _, _),) = self._views([(row, row + b"\x00")])
        try:
            cells = Region.get_of(view, row, spec)
        finally:
            view.release()
        if not cells:
            return {}
        if include_timestamp:
            return {c[1] + b":" + c[2]: (c[5], c[3]) for c in cells}
        return {c[1] + b":" + c[2]: c[5] for c in cells}

    def _scan_cells(
        self, row_start, row_stop, row_prefix, columns, filter, timestamp, include_timestamp,
        batch_size, scan_batching, limit, sorted_columns, reverse, time_range, max_versions,
    ) -> Iterator[tuple[bytes, dict]]:
        make = OrderedDict if sorted_columns else dict
        with self.scanner(
            row_start, row_stop, row_prefix, columns, filter, timestamp, time_range, max_versions,
            limit, reverse, scan_batching, batch_size or 100,
        ) as scanner:
            while True:
                results = scanner.next_rows()
                if not results:
                    return
                for cells in results:
                    if include_timestamp:
                        pairs = [(c[1] + b":" + c[2], (c[5], c[3])) for c in cells]
                    else:
                        pairs = [(c[1] + b":" + c[2], c[5]) for c in cells]
                    if max_versions > 1:
                        # one value per column: its newest (first) cell, in column order
                        pairs = [p for i, p in enumerate(pairs) if i == 0 or p[0] != pairs[i - 1][0]]
                    yield cells[0][0], make(pairs)

    def rows(self, rows: Sequence[bytes], columns: Sequence[bytes] | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> list[tuple[bytes, dict]]:
        """Several rows, as ``[(row, data)]`` for the rows that exist, in the order asked."""
        out = []
        for r in rows:
            data = self.row(r, columns, timestamp, include_timestamp)
            if data:
                out.append((r, data))
        return out

    def cells(self, row: bytes, column: bytes, versions: int | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> list:
        """The versions of one cell, newest first (values, or (value, ts) pairs)."""
        family, qualifier = parse_column(column)
        if qualifier is None:
            raise InvalidArgument(f"column {column!r} needs a qualifier")
        if versions is not None and (not isinstance(versions, int) or versions < 1):
            raise InvalidArgument(f"versions must be a positive int, got {versions!r}")
        row = _check_bytes(row, "row key")
        out = []
        for batch in self.scan_batches(
            row_start=row, row_stop=row + b"\x00", columns=[column], timestamp=timestamp,
            max_versions=versions or (1 << 31), output="cells",
        ):
            values = batch.column("value").to_pylist()
            stamps = batch.column("timestamp").to_pylist()
            out.extend(zip(values, stamps) if include_timestamp else values)
        return out
