"""Appending whole rows to a store file: the row form (one row key array, a
value and timestamp array per qualifier) written straight as dense blocks."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import Cell
from ..errors import InvalidArgument
from .dense import DenseBlock
from .block_cells import CELL_OVERHEAD
from .bloom import row_hash_pairs

MAX_BODY = (1 << 32) - 1  # block header sizes are 32-bit


class WriterRows:
    """``append_rows`` of a :class:`~storage.storefile.writer.StoreFileWriter`."""

    def append_rows(
        self,
        rows: pa.Array,
        qualifiers: list[bytes],
        values: list[pa.Array],
        timestamps: list[pa.Array],
    ) -> None:
        """Add whole rows column by column, written as dense blocks without
        ever becoming cells (format versions 2 and 3).

        ``rows``: binary, strictly ascending, each after every row added
        before.  ``qualifiers``: strictly ascending.  ``values[j]`` and
        ``timestamps[j]``: the value and timestamp of qualifier ``j`` per row,
        both null where the row lacks it; every row has at least one value.
        Blocks (row groups) are cut at row boundaries by the same size
        estimate as cells, at ``row_group_size``.  Rows that do not fill a
        group wait for the next call with the same qualifiers (a bulk load
        appends a batch of a few thousand rows at a time, which would
        otherwise each end a group far below the target), and are written by
        a cell append, a call with other qualifiers, or :meth:`finish`.
        Checks are vectorized; on a violation nothing is added.
        """
        self._check_open()
        n = len(rows)
        q = len(qualifiers)
        if not (q and len(values) == q and len(timestamps) == q) or any(len(c) != n for c in (*values, *timestamps)):
            raise InvalidArgument(f"append_rows needs one value and one timestamp column of {n} entries per qualifier")
        if any(type(x) is not bytes for x in qualifiers) or any(a >= b for a, b in zip(qualifiers, qualifiers[1:])):
            raise InvalidArgument(f"qualifiers must be bytes in strictly ascending order, got {qualifiers!r}")
        if n == 0:
            return
        rows = rows.cast(pa.binary())
        values = [v.cast(pa.binary()) for v in values]
        timestamps = [t.cast(pa.int64()) for t in timestamps]
        if rows.null_count or (n > 1 and not pc.all(pc.less(rows.slice(0, n - 1), rows.slice(1))).as_py()):
            raise InvalidArgument("append_rows: rows must be non-null and strictly ascending")
        if self._last_key is not None and not self._last_key[0] < rows[0].as_py():
            raise InvalidArgument(f"append_rows: row {rows[0].as_py()!r} does not sort after the rows already added")
        any_value = np.zeros(n, dtype=bool)
        sizes = np.zeros(n, dtype=np.int64)
        cells_per_row = np.zeros(n, dtype=np.int64)
        row_len = pc.binary_length(rows).to_numpy(zero_copy_only=False).astype(np.int64)
        for qual, v, t in zip(qualifiers, values, timestamps):
            if v.null_count == 0 and t.null_count == 0:
                valid = True
                value_len = pc.binary_length(v).to_numpy(zero_copy_only=False)
            else:
                valid = v.is_valid().to_numpy(zero_copy_only=False)
                if not np.array_equal(valid, t.is_valid().to_numpy(zero_copy_only=False)):
                    raise InvalidArgument(f"append_rows: qualifier {qual!r} has values and timestamps of different rows")
                value_len = pc.binary_length(v).fill_null(0).to_numpy(zero_copy_only=False)
            any_value |= valid
            cells_per_row += valid
            sizes += np.where(valid, row_len + len(self.family) + len(qual) + value_len + CELL_OVERHEAD, 0)
        if not any_value.all():
            raise InvalidArgument(f"append_rows: row {rows[int(np.flatnonzero(~any_value)[0])].as_py()!r} has no value")
        quals = tuple(qualifiers)
        if self._pending_rows and self._pending_rows[0][1] != quals:
            self._flush_rows()
        self._flush_py()
        self._cut(final=True)  # cells added before end their block here
        for t in timestamps:
            bounds = pc.min_max(t).as_py()
            if bounds["min"] is not None:
                self._min_ts = bounds["min"] if self._min_ts is None else min(self._min_ts, bounds["min"])
                self._max_ts = bounds["max"] if self._max_ts is None else max(self._max_ts, bounds["max"])
        if self._bloom:
            self._hashes.append(row_hash_pairs(rows))
        self._pending_rows.append((rows, quals, values, timestamps, sizes, cells_per_row))
        self._pending_row_bytes += int(sizes.sum())
        self._appended += int(cells_per_row.sum())
        if self._pending_row_bytes >= self.row_group_size:
            self._write_rows(final=False)
        last = DenseBlock(rows.slice(n - 1, 1), quals, [t.slice(n - 1, 1) for t in timestamps],
                          [v.slice(n - 1, 1) for v in values]).row_cell(0, last=True)
        self._last_key = (last[0], self.family, last[2], -last[3], -last[4])

    def _flush_rows(self) -> None:
        """Write the rows :meth:`append_rows` keeps waiting for a full group."""
        if self._pending_rows:
            self._write_rows(final=True)

    def _write_rows(self, final: bool) -> None:
        """Write every full row group of the waiting rows (and the rest if ``final``)."""
        pending = self._pending_rows
        quals = pending[0][1]
        if len(pending) == 1:
            rows, _, values, timestamps, sizes, cells_per_row = pending[0]
        else:
            rows = pa.concat_arrays([p[0] for p in pending])
            values = [pa.concat_arrays([p[2][j] for p in pending]) for j in range(len(quals))]
            timestamps = [pa.concat_arrays([p[3][j] for p in pending]) for j in range(len(quals))]
            sizes = np.concatenate([p[4] for p in pending])
            cells_per_row = np.concatenate([p[5] for p in pending])
        n = len(rows)
        cum = np.cumsum(sizes)
        cum_cells = np.cumsum(cells_per_row)
        start, base = 0, 0
        while start < n:
            if not final and cum[-1] - base < self.row_group_size:
                break  # too few rows left for a group: they wait for the next call
            end = min(int(np.searchsorted(cum, base + self.row_group_size, side="left")) + 1, n)
            size = end - start
            dense = DenseBlock(
                rows.slice(start, size), quals,
                [t.slice(start, size) for t in timestamps], [v.slice(start, size) for v in values],
            )
            self._write_dense(dense, int(cum_cells[end - 1]) - (int(cum_cells[start - 1]) if start else 0))
            start, base = end, int(cum[end - 1])
        if start < n:
            self._pending_rows = [(rows.slice(start), quals, [v.slice(start) for v in values],
                                   [t.slice(start) for t in timestamps], sizes[start:], cells_per_row[start:])]
            self._pending_row_bytes = int(cum[-1]) - base
        else:
            self._pending_rows = []
            self._pending_row_bytes = 0

    def _write_dense(self, dense: DenseBlock, cells: int) -> None:
        """Write one dense block of ``cells`` cells in whole rows (each sorting
        after what came before); timestamps and bloom keys are the caller's."""
        n = dense.num_rows
        family = self.family
        first = Cell(*(family if k == 1 else x for k, x in enumerate(dense.row_cell(0))))
        last = Cell(*(family if k == 1 else x for k, x in enumerate(dense.row_cell(n - 1, last=True))))
        offset = self._offset
        enc = self._encode(None, self._prev_offset, self._file_codec(True), n, dense=dense, cell_count=cells)
        if enc.raw_size > MAX_BODY:
            raise InvalidArgument(f"a data block of {enc.raw_size} bytes is too large (cells over 4 GiB?)")
        # one write per block (a version 3 block is many chunks: a write each would be
        # many small calls into the file system)
        self._file.write(b"".join(enc.parts))
        self._index.add(offset, enc.length, enc.key_length, enc.layout, cells, n, 0, first, enc)
        self._prev_offset = offset
        self._offset += enc.length
        self._uncompressed += enc.raw_size
        self._cell_count += cells
        if self._first_cell is None:
            self._first_cell = first
        self._last_cell = last
        self._row_count += n
        self._note_row_lengths(dense.rows)
        self._last_row = last[0]
