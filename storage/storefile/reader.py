"""StoreFileReader: verified, cached, thread-safe reads of one store file.

Opening reads the trailer and the meta sections (index, bloom filter, file
info) in two reads and verifies all of them.  Data blocks are read on
demand, verified (header and body checksums, agreement with the index) and
decoded into Arrow record batches, through the block cache when there is one.

Sequential reading follows the chain of blocks the way HBase's
``readNextDataBlock`` does: reading block N also reads block N+1's header in
the same ``read_at`` call, and the reader keeps that prefetched header.  The
next sequential read takes block N+1's size from it and reads N+1 (plus
N+2's header) in one call.  With ``prefetch="shared"`` the prefetched header
is one attribute holding an immutable ``(offset, header bytes)`` tuple,
replaced atomically, so it serves whichever thread reads next (a scanner
whose calls hop between threads still reads sequentially, HBASE-10676).
``prefetch="thread_local"`` keeps it per thread, the old HBase behaviour,
for benchmarks; a miss costs one extra header read, counted in
``counters.extra_header_reads``.

On a file that is not memory-mapped (an object store), a forward scan also
reads block N+1 on a background thread while its caller works on block N,
so the next ranged GET is in flight while the current block is consumed.
"""

from __future__ import annotations

import bisect
import sys

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ..cells import Cell
from ..errors import CorruptionError, InvalidArgument, StorageError
from ..vfs.fs import FileSystem
from ._block import Block, decode_body
from ._block_v2 import cells_with, decode_keys, decode_values
from ._dense import DenseBlock
from ._key_runs import key_units
from ._kernels import count_rows_below, first_unsorted, key_at, reverse_rows_order, row_starts
from ._pools import LazyPool
from .bloom import RowBloomFilter, decode_bloom
from .cache import BlockCache
from .codecs import codec_for_code
from .counters import ReadCounters
from .fileinfo import FileInfo
from .format import (
    BLOCK_HEADER_SIZE,
    BLOCK_V2_HEADER_SIZE,
    BlockHeaderV2,
    BLOOM_MAGIC,
    INDEX_MAGIC,
    INFO_MAGIC,
    SECTION_HEADER_SIZE,
    TRAILER_SIZE,
    BlockHeader,
    SectionHeader,
    Trailer,
)
from .index import BlockIndex

if TYPE_CHECKING:
    from .scanner import StoreFileScanner

__all__ = ["StoreFileReader", "BlockPart", "PREFETCH_MODES"]

PREFETCH_MODES = ("shared", "thread_local")

_READ_HEADER = object()  # "no prefetched header: read it separately"
_PREFETCH_POOL = LazyPool(8, "block-prefetch")


def _prefetch_pool() -> ThreadPoolExecutor:
    """The threads that read the next block of remote files ahead of their scanners."""
    return _PREFETCH_POOL.get()


def _list_bytes(items: list) -> int:
    """Memory of a list of bytes objects: the list and each object (header included)."""
    return sys.getsizeof(items) + sum(map(sys.getsizeof, items))


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
        if keys_only and piece.values is not None:
            piece = DenseBlock(piece.rows, piece.qualifiers, piece.timestamps, None)
        return BlockPart(None, piece, continued, open_, family)
    batch = block.batch
    if keys_only and not block.keys_only:
        batch = cells_with(batch.select([0, 2, 3, 4]), None, family)
    return BlockPart(batch if (lo, hi) == (0, n) else batch.slice(lo, hi - lo), None, continued, open_, family)


class StoreFileReader:
    """Reads one store file (format version 1 or 2); safe to share between threads.

    ``info`` (:class:`FileInfo`), ``format_version``, ``block_count`` and
    ``block_first_keys`` (sort keys of each block's first cell) come from the
    verified meta sections.  ``counters`` (:class:`ReadCounters`) is shared by every
    thread and scanner of this reader.  ``cache`` is the connection's
    :class:`BlockCache`, or None.
    """

    def __init__(
        self,
        fs: FileSystem,
        path: str,
        *,
        cache: BlockCache | None = None,
        prefetch: str = "shared",
    ):
        if prefetch not in PREFETCH_MODES:
            raise InvalidArgument(f"prefetch must be one of {PREFETCH_MODES}, got {prefetch!r}")
        self.fs = fs
        self.path = path
        self.prefetch = prefetch
        self.counters = ReadCounters()
        self._where = fs.uri(path)
        self._cache = cache
        self._shared_prefetch = prefetch == "shared"
        self._prefetched: tuple[int, bytes] | None = None
        self._local = threading.local()
        self._closed = False
        size = fs.size(path)
        if size < TRAILER_SIZE:
            raise CorruptionError(f"file of {size} bytes is too short for a store file (truncated?)", self._where, 0)
        self._file = fs.open_read(path)
        self._size = size
        self._mapped: pa.Buffer | None = None
        try:
            if isinstance(self._file, pa.MemoryMappedFile):
                # The whole mapping as one buffer: block reads become zero-copy
                # slices of it, safe from any thread.
                self._file.seek(0)
                self._mapped = self._file.read_buffer(size)
            self._open(size)
        except BaseException:
            self._file.close()
            raise

    # -- opening -----------------------------------------------------------
    def _open(self, size: int) -> None:
        where = self._where
        raw = self._read(size - TRAILER_SIZE, TRAILER_SIZE)
        trailer = Trailer.decode(raw, where, size)
        meta = memoryview(self._read(trailer.index_offset, size - TRAILER_SIZE - trailer.index_offset))

        def section(offset: int, length: int, magic: bytes) -> memoryview:
            rel = offset - trailer.index_offset
            return SectionHeader.unframe(meta[rel : rel + length], magic, where, offset)

        codec = codec_for_code(trailer.compression)
        if codec is None:
            raise CorruptionError(f"unknown compression code {trailer.compression}", where, size - TRAILER_SIZE)
        codec.require()
        info_body = section(trailer.info_offset, trailer.info_length, INFO_MAGIC)
        info = FileInfo.from_json(info_body, size, where, trailer.info_offset + SECTION_HEADER_SIZE)
        if (
            info.block_count != trailer.block_count
            or info.format_version != trailer.format_version
            or info.data_size != trailer.index_offset
            or (info.compression or "none") != codec.name
            or info.has_bloom != bool(trailer.bloom_length)
        ):
            raise CorruptionError("file info disagrees with the trailer", where, trailer.info_offset)
        index_body = section(trailer.index_offset, trailer.index_length, INDEX_MAGIC)
        index = BlockIndex.decode(
            index_body,
            where,
            trailer.index_offset + SECTION_HEADER_SIZE,
            trailer.index_offset,
            trailer.block_count,
            trailer.format_version,
            info.family,
        )
        if sum(index.cell_counts) != info.cell_count:
            raise CorruptionError("block index cell counts disagree with the file info", where, trailer.index_offset)
        bloom = None
        if trailer.bloom_length:
            bloom_body = section(trailer.bloom_offset, trailer.bloom_length, BLOOM_MAGIC)
            bloom = decode_bloom(bloom_body, where, trailer.bloom_offset + SECTION_HEADER_SIZE)
        self.info: FileInfo = info
        self.block_count: int = len(index)
        self.block_first_keys: list[tuple] = index.first_keys
        self.file_id = (where, size, bytes(memoryview(raw)[-4:]).hex())  # block cache identity
        self._index = index
        self._codec = codec
        self._bloom: RowBloomFilter | None = bloom
        self._data_end = trailer.index_offset
        self.format_version: int = trailer.format_version
        self._hsize = BLOCK_V2_HEADER_SIZE if trailer.format_version >= 2 else BLOCK_HEADER_SIZE
        if index.row_counts is not None and index.rows_in_blocks(0, len(index)) != info.row_count:
            raise CorruptionError("block index row counts disagree with the file info", where, trailer.index_offset)

    # -- raw reads ---------------------------------------------------------
    def _read(self, offset: int, nbytes: int, block: bool = False) -> pa.Buffer:
        if self._closed:
            raise StorageError(f"store file reader of {self._where} is closed")
        if self._mapped is not None:
            end = min(offset + nbytes, self._size)
            buf = self._mapped.slice(offset, max(end - offset, 0))
        else:
            buf = pa.py_buffer(self._file.read_at(nbytes, offset))
        self.counters.add_read(buf.size, block)
        if buf.size != nbytes:
            raise CorruptionError(f"short read ({buf.size} of {nbytes} bytes; truncated file?)", self._where, offset)
        return buf

    def _get_prefetched(self) -> tuple[int, bytes] | None:
        if self._shared_prefetch:
            return self._prefetched
        return getattr(self._local, "prefetched", None)

    def _set_prefetched(self, value: tuple[int, bytes]) -> None:
        if self._shared_prefetch:
            self._prefetched = value  # one atomic attribute store: no lock needed
        else:
            self._local.prefetched = value

    # -- blocks ------------------------------------------------------------
    def _load(self, i: int, header_raw, use_cache: bool, cache_blocks: bool) -> Block:
        """Block ``i``: from the cache, or read, verified and decoded.

        ``header_raw`` is the block's header when the caller already has it
        (sequential read after a prefetch), else None: for a random access
        the index gives the size; for a sequential one without a prefetched
        header the caller passes ``_READ_HEADER`` to read the header separately.
        """
        idx = self._index
        offset = idx.offsets[i]
        length = idx.lengths[i]
        key = (self.file_id, offset)
        cache = self._cache
        if use_cache and cache is not None:
            hit = cache.get(key)
            if hit is not None:
                self.counters.add("cache_hits")
                return hit
            self.counters.add("cache_misses")
        hsize = self._hsize
        has_next = i + 1 < len(idx)
        tail = hsize if has_next else 0
        if header_raw is _READ_HEADER:
            header_raw = self._read(offset, hsize)
            self.counters.add("extra_header_reads")
        if header_raw is None:
            # Random access: header, body and the next header in one read.
            buf = self._read(offset, length + tail, block=True)
            header_raw = buf.slice(0, hsize)
            body = buf.slice(hsize, length - hsize)
        else:
            # Sequential: the size comes from the index (checked against the
            # header below); body and next header in one read.
            buf = self._read(offset + hsize, length - hsize + tail, block=True)
            body = buf.slice(0, length - hsize)
        if has_next:
            self._set_prefetched((offset + length, buf.slice(buf.size - tail).to_pybytes()))
        if self.format_version >= 2:
            header = self._header_v2(header_raw, i)
            keys = decode_keys(header, body.slice(0, header.key_end - hsize), self._codec, self._where, offset)
            values = body.slice(header.key_end - hsize)
            decoded = decode_values(header, keys, values, self._codec, self.info.family, self._where, offset)
            if isinstance(decoded, DenseBlock):
                block = Block(i, offset, length, None, decoded, self.info.family)
            else:
                block = Block(i, offset, length, decoded)
        else:
            header = BlockHeader.decode(header_raw, self._where, offset)
            self._check_header(header, i, offset, length)
            batch = decode_body(header, body, self._codec, self._where, offset)
            block = Block(i, offset, length, batch)
        if cache_blocks and cache is not None:
            cache.put(key, block, block.nbytes)
            block.on_grow = self._recharge
        return block

    def _recharge(self, block: Block) -> None:
        """Charge a cached block for all it holds now (its cells once built, the
        row-key list a point read attached)."""
        extra = _list_bytes(block.rows) if block.rows is not None else 0
        self._cache.recharge((self.file_id, block.offset), block, block.nbytes + extra)

    def _check_header(self, header: BlockHeader, i: int, offset: int, length: int) -> None:
        idx = self._index
        prev = idx.offsets[i - 1] if i else -1
        if BLOCK_HEADER_SIZE + header.on_disk_size != length or header.prev_offset != prev:
            raise CorruptionError("data block header disagrees with the block index", self._where, offset)
        if header.cell_count != idx.cell_counts[i]:
            raise CorruptionError("data block cell count disagrees with the block index", self._where, offset)

    def _header_v2(self, raw, i: int) -> BlockHeaderV2:
        """Decode a version 2 block header and check it against the index."""
        idx = self._index
        offset = idx.offsets[i]
        header = BlockHeaderV2.decode(raw, self._where, offset)
        prev = idx.offsets[i - 1] if i else -1
        if (
            header.length != idx.lengths[i]
            or header.key_end != idx.key_lengths[i]
            or header.prev_offset != prev
            or header.layout != idx.layouts[i]
        ):
            raise CorruptionError("data block header disagrees with the block index", self._where, offset)
        if header.cell_count != idx.cell_counts[i] or header.row_count != int(idx.row_counts[i]):
            raise CorruptionError("data block cell or row count disagrees with the block index", self._where, offset)
        if header.compression != self._codec.code:
            raise CorruptionError(
                f"data block compression code {header.compression} differs from the file's ({int(self._codec.code)})",
                self._where,
                offset,
            )
        return header

    def _load_keys(self, i: int, cache_blocks: bool):
        """Block ``i`` for its keys only: a cached full block, or the header and
        key section alone (one read; the value section is never read, checked
        or, through a mapping, touched).  Returns a :class:`Block`."""
        idx = self._index
        offset = idx.offsets[i]
        cache = self._cache
        if cache is not None:
            hit = cache.get((self.file_id, offset, "keys"))
            if hit is None:
                hit = cache.get((self.file_id, offset))
            if hit is not None:
                self.counters.add("cache_hits")
                return hit
            self.counters.add("cache_misses")
        if self.format_version < 2:
            return self._load(i, None, False, cache_blocks)
        hsize = self._hsize
        buf = self._read(offset, idx.key_lengths[i], block=True)
        header = self._header_v2(buf.slice(0, hsize), i)
        keys = decode_keys(header, buf.slice(hsize), self._codec, self._where, offset)
        family = self.info.family
        if isinstance(keys, DenseBlock):
            block = Block(i, offset, idx.lengths[i], None, keys, family, keys_only=True)
        else:
            block = Block(i, offset, idx.lengths[i], cells_with(keys, None, family), keys_only=True)
        if cache_blocks and cache is not None:
            cache.put((self.file_id, offset, "keys"), block, block.nbytes)
        return block

    def _block(self, i: int, cache_blocks: bool = True, use_cache: bool = True) -> Block:
        """Block ``i`` by random access through the index."""
        return self._load(i, None, use_cache, cache_blocks)

    def _next_block(self, block: Block, cache_blocks: bool = True, use_cache: bool = True) -> Block | None:
        """The block after ``block``, read sequentially; None at the end of the data."""
        offset = block.next_offset
        if offset >= self._data_end:
            return None
        i = block.index + 1
        if use_cache and self._cache is not None and (self.file_id, offset) in self._cache:
            return self._load(i, None, True, cache_blocks)  # a hit: no read at all
        prefetched = self._get_prefetched()
        header_raw = prefetched[1] if prefetched is not None and prefetched[0] == offset else _READ_HEADER
        return self._load(i, header_raw, use_cache, cache_blocks)

    def find_block(self, key: tuple) -> int:
        """Index of the block that may hold the first cell with sort key >= ``key``
        (a bisect on the block index; -1 for a file without blocks).

        ``key`` is a :func:`storage.cells.sort_key` tuple or a prefix of one
        (``(row,)`` sorts before every cell of ``row``).
        """
        return self._index.find_block(key)

    def row_cells(self, row: bytes) -> list[Cell]:
        """Every cell of ``row`` in this file, in cell order: the point-read path.

        The bloom filter answers most misses without reading a block; within
        a block the row is found by bisecting its row keys, a Python list
        built once per cached block, so a get costs a bisect and a slice.
        """
        if self.block_count == 0 or not self.might_contain_row(row):
            return []
        self.counters.add("seeks")
        i = max(self.find_block((row,)), 0)
        out: list[Cell] = []
        while i < self.block_count:
            block = self._block(i)
            rows = block.rows
            if rows is None:
                rows = block.rows = block.batch.column(0).to_pylist()
                if self._cache is not None:  # the cached block now holds the list too: charge it
                    self._recharge(block)
            lo = bisect.bisect_left(rows, row)
            hi = bisect.bisect_right(rows, row, lo)
            if hi > lo:
                part = block.batch.slice(lo, hi - lo)
                out.extend(map(Cell._make, zip(*[part.column(k).to_pylist() for k in range(6)])))
            if hi < len(rows):
                break
            i += 1
        return out

    def read_block(self, i: int) -> pa.RecordBatch:
        """Data block ``i`` as a ``CELL_SCHEMA`` batch (verified, decompressed, cached)."""
        if not isinstance(i, int) or not 0 <= i < self.block_count:
            raise InvalidArgument(f"block number must be in [0, {self.block_count}), got {i!r}")
        return self._block(i).batch

    # -- scans -------------------------------------------------------------
    def scan_batches(
        self,
        start_row: bytes | None = None,
        stop_row: bytes | None = None,
        reverse: bool = False,
        *,
        cache_blocks: bool = True,
        keys_only: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """Cells of rows in ``[start_row, stop_row)`` as block-sized batches.

        Forward: blocks in file order, read sequentially (prefetched headers),
        each sliced to the range.  Reverse: rows in descending order, each
        row's cells still in ascending (cell) order; a row that spans blocks
        comes out whole in one batch, so a batch may hold cells of two
        blocks.  Either way no Python loop runs per cell.  ``cache_blocks``
        False reads through the cache without adding to it (big scans).
        ``keys_only`` (forward only) gives every cell an empty value and, in
        a version 2 file, never reads the value sections.
        """
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
    ) -> Iterator[BlockPart]:
        """The blocks of rows in ``[start_row, stop_row)``, forward, as
        :class:`BlockPart` pieces: dense blocks stay columns (a row slice of
        them), the others are cell batches.  ``keys_only`` reads only the key
        sections of a version 2 file (values come out empty), and a run of
        consecutive dense blocks of up to ``run_rows`` rows then comes out as
        one part (:mod:`._key_runs`: one decode for the run, not one per block)."""
        self._check_range(start_row, stop_row)
        if self.block_count == 0 or (start_row is not None and stop_row is not None and stop_row <= start_row):
            return
        keys = self.block_first_keys
        family = self.info.family
        first = self.find_block((start_row,)) if start_row is not None else 0
        last = self.block_count - 1 if stop_row is None else max(bisect.bisect_left(keys, (stop_row,)) - 1, first)
        if keys_only and self.format_version >= 2:
            units = key_units(self, first, last, cache_blocks, run_rows)
        else:
            units = self._block_units(first, last, cache_blocks, keys_only)
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
                    yield _block_part(block, lo, hi, n, continued, open_, keys_only, family)
                prev_last = last_row
        finally:
            units.close()

    def _block_units(self, first: int, last: int, cache_blocks: bool, keys_only: bool) -> Iterator[tuple[Block, int]]:
        """Blocks ``first`` to ``last`` one at a time, as ``(block, block.index)``,
        read sequentially (prefetched headers; on a remote file the next block
        is fetched on a background thread while the caller works on this one)."""
        block = self._load_keys(first, cache_blocks) if keys_only else self._block(first, cache_blocks)
        while True:
            i = block.index
            if i == last:
                yield block, i
                return
            if keys_only:
                fetch, args = self._load_keys, (i + 1, cache_blocks)
            else:
                fetch, args = self._next_block, (block, cache_blocks)
            if self._mapped is None:
                # A remote file: fetch the next block (one ranged read, which
                # also brings the block after's header) while the caller
                # works on this one, so the pipe stays full (HBase seed 001).
                upcoming = _prefetch_pool().submit(fetch, *args)
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
        """Distinct rows of the file in ``[start_row, stop_row)``, delete markers
        and versions not considered (a clean file's visible row count).

        In a version 2 file the blocks wholly inside the range are counted from
        the block index alone; only the (at most two) blocks at the range's
        ends are read, for their keys.  A version 1 file is read for its keys.
        """
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

    # -- point lookups -----------------------------------------------------
    @property
    def has_bloom(self) -> bool:
        """True when the file has a bloom filter this reader can use."""
        return self._bloom is not None

    def might_contain_row(self, row: bytes) -> bool:
        """False only if the file certainly has no cell of ``row`` (range check, then bloom filter)."""
        info = self.info
        if info.cell_count == 0 or row < info.first_cell[0] or row > info.last_cell[0]:
            return False
        return self._bloom is None or self._bloom.might_contain(row)

    def scanner(self, *, cache_blocks: bool = True) -> "StoreFileScanner":
        """A new cell-at-a-time :class:`StoreFileScanner` over this file."""
        from .scanner import StoreFileScanner  # scanner imports this module

        return StoreFileScanner(self, cache_blocks=cache_blocks)

    # -- verification ------------------------------------------------------
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

    # -- lifecycle ---------------------------------------------------------
    def close(self) -> None:
        """Close the file.  Batches already returned stay valid."""
        if not self._closed:
            self._closed = True
            self._mapped = None
            self._file.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "StoreFileReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StoreFileReader({self._where!r}, blocks={self.block_count}, cells={self.info.cell_count})"
