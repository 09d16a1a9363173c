"""The full integrity check of a store file: every block, the index, the bloom
filter and the file info re-read and compared."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptionError
from ..kernels.order import first_unsorted, row_starts
from .block_cells import key_at


class ReaderCheck:
    """``check()`` of a :class:`~storage.storefile.reader.StoreFileReader`."""

    def check(self) -> None:
        """Verify every invariant of the file, reading every block from disk.

        Checksums of all blocks (the meta sections were verified at open),
        block order and agreement with the index, cell order within and
        across blocks, family, cell/row/block counts, first/last cell,
        timestamp bounds and that the bloom filter holds every row.
        Raises :class:`CorruptionError` naming the file and offset.
        """
        info = self.info
        where = self._where
        count = rows_seen = blocks = 0
        prev_key = prev_row = None
        min_ts = max_ts = None
        first_cell = last_cell = None
        block = self._block(0, cache_blocks=False, use_cache=False) if self.block_count else None
        while block is not None:
            batch = block.batch
            n = batch.num_rows
            at = block.offset
            if first_unsorted(batch) is not None:
                raise CorruptionError("cells of a data block are out of order", where, at)
            families = batch.column(1).unique()
            if len(families) != 1 or families[0].as_py() != info.family:
                raise CorruptionError("data block holds cells of another family", where, at)
            first_key = key_at(batch, 0)
            if first_key != self.block_first_keys[block.index]:
                raise CorruptionError("data block first key disagrees with the index", where, at)
            if prev_key is not None and not prev_key < first_key:
                raise CorruptionError("data block does not sort after the previous block", where, at)
            prev_key = key_at(batch, n - 1)
            ts = batch.column(3)
            lo_ts, hi_ts = pc.min(ts).as_py(), pc.max(ts).as_py()
            min_ts = lo_ts if min_ts is None else min(min_ts, lo_ts)
            max_ts = hi_ts if max_ts is None else max(max_ts, hi_ts)
            row_col = batch.column(0)
            starts = row_starts(row_col)
            rows_seen += len(starts) - (1 if row_col[0].as_py() == prev_row else 0)
            prev_row = row_col[n - 1].as_py()
            if self._bloom is not None and not self._bloom.might_contain_many(row_col.take(pa.array(starts))).all():
                raise CorruptionError("bloom filter misses a row of the data block", where, at)
            if first_cell is None:
                first_cell = tuple(c[0].as_py() for c in batch.slice(0, 1).columns)
            last_cell = tuple(c[0].as_py() for c in batch.slice(n - 1, 1).columns)
            count += n
            blocks += 1
            block = self._next_block(block, cache_blocks=False, use_cache=False)
        expected = (
            info.cell_count,
            info.row_count,
            info.block_count,
            info.min_timestamp,
            info.max_timestamp,
            None if info.first_cell is None else tuple(info.first_cell),
            None if info.last_cell is None else tuple(info.last_cell),
        )
        found = (count, rows_seen, blocks, min_ts, max_ts, first_cell, last_cell)
        names = ("cell_count", "row_count", "block_count", "min_timestamp", "max_timestamp", "first_cell", "last_cell")
        wrong = [name for name, f, e in zip(names, found, expected) if f != e]
        if wrong:
            raise CorruptionError(f"data blocks disagree with the file info on {', '.join(wrong)}", where, self._data_end)
