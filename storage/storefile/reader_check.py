"""The full integrity check of a store file: every block, the index, the bloom
filter and the file info re-read and compared.

:func:`check_blocks` is what :meth:`StoreFileReader.check
<storage.storefile.reader.StoreFileReader.check>` runs; the reader hands it its
verified meta sections and its data blocks read from disk, in file order."""

from __future__ import annotations

from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptionError
from ..kernels.order import first_unsorted, row_starts
from ._block import Block
from .block_cells import key_at
from .bloom import RowBloomFilter
from .fileinfo import FileInfo

__all__ = ["check_blocks"]


def check_blocks(info: FileInfo, where: str, data_blocks: Iterable[Block], block_first_keys: list[tuple],
                 bloom: RowBloomFilter | None, data_end: int) -> None:
    """Check a file's data blocks (every one, in file order, as read and verified
    from disk) against each other, the block index's first keys, the bloom
    filter and the file info; ``data_end`` (where the data ends) is the offset
    named when the totals disagree.  Raises :class:`CorruptionError` naming
    the file and offset."""
    count = rows_seen = blocks = 0
    prev_key = prev_row = None
    min_ts = max_ts = None
    first_cell = last_cell = None
    for block in data_blocks:
        batch = block.batch
        n = batch.num_rows
        at = block.offset
        if first_unsorted(batch) is not None:
            raise CorruptionError("cells of a data block are out of order", where, at)
        families = batch.column(1).unique()
        if len(families) != 1 or families[0].as_py() != info.family:
            raise CorruptionError("data block holds cells of another family", where, at)
        first_key = key_at(batch, 0)
        if first_key != block_first_keys[block.index]:
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
        if bloom is not None and not bloom.might_contain_many(row_col.take(pa.array(starts))).all():
            raise CorruptionError("bloom filter misses a row of the data block", where, at)
        if first_cell is None:
            first_cell = tuple(c[0].as_py() for c in batch.slice(0, 1).columns)
        last_cell = tuple(c[0].as_py() for c in batch.slice(n - 1, 1).columns)
        count += n
        blocks += 1
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
        raise CorruptionError(f"data blocks disagree with the file info on {', '.join(wrong)}", where, data_end)
