"""Range reads of a store file: batches and block parts of a key range, forward
or reversed, with block prefetch, and row counts from the block index.

:class:`FileScans` is the collaborator a
:class:`~storage.storefile.reader.StoreFileReader` holds for them; the reader
hands it its verified block index, file info and format version, and its block
reads (random, sequential, keys only, and the key-run reader's
:class:`~storage.storefile.block_source.BlockSource`)."""

from __future__ import annotations

import bisect
from typing import Callable, Iterator

import pyarrow as pa

from ..errors import InvalidArgument, StorageError
from ._block import Block
from ._block_v2 import cells_with
from .dense import DenseBlock
from .dense_rows import ColumnsWhere
from .block_cells import count_rows_below
from .block_source import BlockSource
from .fileinfo import FileInfo
from .index import BlockIndex
from ..kernels.order import reverse_rows_order, row_starts
from ._key_runs import key_units
from ._pools import prefetch_pool

__all__ = ["BlockPart", "FileScans"]


class BlockPart:
    """A forward scan's piece of one data block, limited to the scanned rows.

    Exactly one of ``cells`` (a ``CELL_SCHEMA`` batch) and ``dense`` (a
    :class:`DenseBlock` sliced to the rows) is set.  ``continued``: the first
    row began in an earlier block; ``open``: the last row goes on in the next
    block.  Values are empty when the scan asked for keys only.
    """

    __slots__ = ("cells", "dense", "continued", "open", "family")

    def __init__(self, cells, dense, continued: bool, open_: bool, family: bytes):
        self.cells = cells
        self.dense = dense
        self.continued = continued
        self.open = open_
        self.family = family

    def batch(self) -> pa.RecordBatch:
        """The part as cells."""
        return self.cells if self.cells is not None else self.dense.cells(self.family)


def _block_part(
    block: Block, lo: int, hi: int, n: int, continued: bool, open_: bool, keys_only: bool, family: bytes
) -> BlockPart:
    """Rows ``lo`` to ``hi`` of a block's ``n`` as a :class:`BlockPart`
    (values dropped when the scan asked for keys only)."""
    dense = block.dense
    if dense is not None:
        piece = dense if (lo, hi) == (0, n) else dense.slice(lo, hi)
        if keys_only and piece.read_values is not None:
            piece = DenseBlock(piece.rows, piece.qualifiers, piece.timestamps, None, piece._cells)
        return BlockPart(None, piece, continued, open_, family)
    batch = block.batch
    if keys_only and not block.keys_only:
        batch = cells_with(batch.select([0, 2, 3, 4]), None, family)
    return BlockPart(batch if (lo, hi) == (0, n) else batch.slice(lo, hi - lo), None, continued, open_, family)


class FileScans:
    """Scans and counts of one :class:`~storage.storefile.reader.StoreFileReader`.

    ``block(i, cache_blocks)`` reads block ``i`` by random access,
    ``next_block(block, cache_blocks)`` the one after ``block`` sequentially (None
    at the end), ``load_keys(i, cache_blocks)`` block ``i``'s keys alone and
    ``block_source()`` gives the key-run reader's view of the file;
    ``pipelined``: the next block is fetched on a thread while this one is used.
    """

    __slots__ = ("_index", "info", "format_version", "block_count", "block_first_keys", "find_block",
                 "_pipelined", "_block", "_next_block", "_load_keys", "block_source", "_load_columns")

    def __init__(self, index: BlockIndex, info: FileInfo, format_version: int, pipelined: bool,
                 block: Callable[..., Block], next_block: Callable[..., Block | None],
                 load_keys: Callable[[int, bool], Block], block_source: Callable[[], BlockSource],
                 load_columns: Callable[[int, frozenset, bool], Block] | None = None):
        self._index = index
        self.info = info
        self.format_version = format_version
        self.block_count = len(index)
        self.block_first_keys = index.first_keys
        self.find_block = index.find_block
        self._pipelined = pipelined
        self._block = block
        self._next_block = next_block
        self._load_keys = load_keys
        self.block_source = block_source
        self._load_columns = load_columns

    def detach(self, where: str) -> None:
        """Drop the reader's block reads (its reader closed): the reader and this
        object then hold no reference cycle, so a closed reader is freed at once
        (its index and bloom filter with it), not at the next full collection."""
        def closed(*_: object) -> None:
            raise StorageError(f"store file reader of {where} is closed")

        self._block = self._next_block = self._load_keys = self.block_source = self._load_columns = closed

    def scan_batches(
        self,
        start_row: bytes | None = None,
        stop_row: bytes | None = None,
        reverse: bool = False,
        *,
        cache_blocks: bool = True,
        keys_only: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """Cells of rows in ``[start_row, stop_row)`` as block-sized batches, forward
        or reversed (see :meth:`StoreFileReader.scan_batches`)."""
        self._check_range(start_row, stop_row)
        if self.block_count == 0 or (start_row is not None and stop_row is not None and stop_row <= start_row):
            return iter(())
        if reverse:
            return self._scan_reverse(start_row, stop_row, cache_blocks)
        return (part.batch() for part in self.scan_parts(start_row, stop_row, cache_blocks=cache_blocks, keys_only=keys_only))

    @staticmethod
    def _check_range(start_row, stop_row) -> None:
        for name, value in (("start_row", start_row), ("stop_row", stop_row)):
            if value is not None and not isinstance(value, bytes):
                raise InvalidArgument(f"{name} must be bytes or None, got {value!r}")

    def scan_parts(
        self,
        start_row: bytes | None = None,
        stop_row: bytes | None = None,
        *,
        cache_blocks: bool = True,
        keys_only: bool = False,
        run_rows: int = 65536,
        columns=None,
    ) -> Iterator[BlockPart]:
        """The blocks of rows in ``[start_row, stop_row)``, forward, as :class:`BlockPart`
        pieces (see :meth:`StoreFileReader.scan_parts`; :mod:`._key_runs` decodes runs of
        keys-only dense blocks together; ``columns`` limits the value chunks read)."""
        self._check_range(start_row, stop_row)
        if self.block_count == 0 or (start_row is not None and stop_row is not None and stop_row <= start_row):
            return
        keys = self.block_first_keys
        family = self.info.family
        first = self.find_block((start_row,)) if start_row is not None else 0
        last = self.block_count - 1 if stop_row is None else max(bisect.bisect_left(keys, (stop_row,)) - 1, first)
        wanted = None
        if columns is not None and not keys_only and self.format_version >= 3 and self._load_columns is not None:
            # a list of qualifiers, or a container testing each (dense_rows.ColumnsWhere)
            wanted = columns if isinstance(columns, ColumnsWhere) else frozenset(columns)
        if keys_only and self.format_version >= 2:
            units = key_units(self.block_source(), first, last, cache_blocks, run_rows)
        else:
            units = self._block_units(first, last, cache_blocks, keys_only, wanted)
        # version 2: whether a block's first row began in the previous block is in the index
        starts = self._index.row_start_list
        prev_last: bytes | None = None
        try:
            for block, b in units:  # blocks block.index to b
                a = block.index
                dense = block.dense
                rows = dense.rows if dense is not None else block.batch.column(0)
                n = len(rows)
                lo, hi = 0, n
                if start_row is not None and a == first and keys[first][0] < start_row:
                    lo = count_rows_below(rows, start_row)
                last_block = b == last
                last_row = rows[n - 1].as_py() if starts is None or (last_block and stop_row is not None) else None
                if last_block and stop_row is not None and last_row >= stop_row:
                    hi = count_rows_below(rows, stop_row)
                if hi > lo:
                    if starts is not None:
                        continued = lo == 0 and starts[a] > 0
                        open_ = hi == n and not last_block and starts[b + 1] > 0
                    else:
                        continued = lo == 0 and prev_last is not None and keys[a][0] == prev_last
                        open_ = hi == n and not last_block and keys[b + 1][0] == last_row
                    if wanted is not None and (continued or open_) and dense is not None and not dense.complete:
                        block = self._block(a, cache_blocks)  # a row cut across blocks goes by cells: all columns
                    yield _block_part(block, lo, hi, n, continued, open_, keys_only, family)
                prev_last = last_row
        finally:
            units.close()

    def _block_units(self, first: int, last: int, cache_blocks: bool, keys_only: bool,
                     columns: "frozenset | ColumnsWhere | None" = None) -> Iterator[tuple[Block, int]]:
        """Blocks ``first`` to ``last`` one at a time, as ``(block, block.index)``,
        read sequentially (prefetched headers; on a remote file the next block
        is fetched on a background thread while the caller works on this one);
        with ``columns``, only those value chunks (a version 3 file)."""
        if keys_only:
            block = self._load_keys(first, cache_blocks)
        elif columns is not None:
            block = self._load_columns(first, columns, cache_blocks)
        else:
            block = self._block(first, cache_blocks)
        while True:
            i = block.index
            if i == last:
                yield block, i
                return
            if keys_only:
                fetch, args = self._load_keys, (i + 1, cache_blocks)
            elif columns is not None:
                fetch, args = self._load_columns, (i + 1, columns, cache_blocks)
            else:
                fetch, args = self._next_block, (block, cache_blocks)
            if self._pipelined:
                # A remote file: fetch the next block (one ranged read, which
                # also brings the block after's header) while the caller
                # works on this one, so the pipe stays full (HBase seed 001).
                upcoming = prefetch_pool().submit(fetch, *args)
                try:
                    yield block, i
                except GeneratorExit:
                    upcoming.cancel()  # the scan stopped early: nobody wants that block
                    raise
                block = upcoming.result()
            else:
                yield block, i
                block = fetch(*args)

    def count_rows(self, start_row: bytes | None = None, stop_row: bytes | None = None) -> int:
        """Distinct rows of the file in ``[start_row, stop_row)``, from the block index
        where it can (see :meth:`StoreFileReader.count_rows`)."""
        self._check_range(start_row, stop_row)
        idx = self._index
        if self.block_count == 0 or (start_row is not None and stop_row is not None and stop_row <= start_row):
            return 0
        if idx.row_counts is None:
            total, last = 0, None
            for batch in self.scan_batches(start_row, stop_row, keys_only=True):
                rows = batch.column(0)
                total += len(row_starts(rows)) - (1 if rows[0].as_py() == last else 0)
                last = rows[len(rows) - 1].as_py()
            return total
        keys = self.block_first_keys
        count = self.block_count
        lo = self.find_block((start_row,)) if start_row is not None else 0
        hi = count if stop_row is None else max(bisect.bisect_left(keys, (stop_row,)), lo + 1)
        last_file_row = self.info.last_cell[0]

        def inside(j: int) -> bool:
            after_start = start_row is None or keys[j][0] >= start_row
            end_row = keys[j + 1][0] if j + 1 < count else last_file_row
            before_stop = stop_row is None or end_row < stop_row
            return after_start and before_stop

        total = 0
        j = lo
        while j < hi:
            if inside(j):
                k = j
                while k < hi and inside(k):
                    k += 1
                total += idx.rows_in_blocks(j, k)
                j = k
                continue
            total += self._rows_beginning_in(j, start_row, stop_row)
            j += 1
        return total

    def _rows_beginning_in(self, j: int, start_row: bytes | None, stop_row: bytes | None) -> int:
        """Rows of block ``j`` (keys only) that begin in it and lie in the range."""
        block = self._load_keys(j, cache_blocks=True)
        rows = block.dense.rows if block.dense is not None else block.batch.column(0)
        starts = row_starts(rows)
        distinct = rows.take(pa.array(starts)) if len(starts) != len(rows) else rows
        if int(self._index.row_starts[j]) > 0:
            distinct = distinct.slice(1)  # began in the previous block, counted there
        n = len(distinct)
        lo = count_rows_below(distinct, start_row) if start_row is not None else 0
        hi = count_rows_below(distinct, stop_row) if stop_row is not None else n
        return max(hi - lo, 0)

    def _scan_reverse(self, start_row, stop_row, cache_blocks) -> Iterator[pa.RecordBatch]:
        keys = self.block_first_keys
        j = self.find_block((stop_row,)) if stop_row is not None else self.block_count - 1
        carry: pa.RecordBatch | None = None  # the lowest row seen so far, which may continue in block j-1
        while j >= 0:
            batch = self._block(j, cache_blocks).batch
            rows = batch.column(0)
            n = batch.num_rows
            lo, hi = 0, n
            done = j == 0
            if start_row is not None and keys[j][0] < start_row:
                lo = count_rows_below(rows, start_row)
                done = True
            if stop_row is not None and rows[n - 1].as_py() >= stop_row:
                hi = count_rows_below(rows, stop_row)
            part = batch.slice(lo, hi - lo)
            if carry is not None:
                part = pa.concat_batches([part, carry])
                carry = None
            starts = row_starts(part.column(0))
            if not done and len(starts):
                head = int(starts[1]) if len(starts) > 1 else part.num_rows
                carry = part.slice(0, head)
                part = part.slice(head)
                starts = starts[1:] - head
            if part.num_rows:
                yield part.take(pa.array(reverse_rows_order(starts, part.num_rows)))
            if done:
                return
            j -= 1
