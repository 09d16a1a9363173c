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

On a remote file (an object store), a forward scan also reads block N+1 on
a background thread while its caller works on block N, so the next ranged
GET is in flight while the current block is consumed.  A local file that is
read, not mapped (``REGIONSCAN_MMAP=0``), is not read ahead: each block is
read by the thread that decodes it, with one ``preadv`` into a buffer of
Arrow's memory pool.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ..cells import Cell
from ..checksum import crc32
from ..errors import CorruptionError, InvalidArgument, StorageError
from ..vfs.fs import FileSystem
from ._block import Block, decode_body
from ._block_v2 import cells_with, decode_keys, decode_values
from ._block_v3 import check_chunk_count, chunk_runs, decode_block_v3, decode_key_chunk, decode_value_chunk
from .dense import DenseBlock
from .block_source import BlockSource
from .bloom import RowBloomFilter, decode_bloom
from .cache import BlockCache
from .codecs import codec_for_code
from .counters import ReadCounters
from .fileinfo import FileInfo
from .format import (
    BLOCK_HEADER_SIZE,
    BLOCK_V2_HEADER_SIZE,
    BLOCK_V3_HEADER_SIZE,
    BLOOM_MAGIC,
    INDEX_MAGIC,
    INFO_MAGIC,
    SECTION_HEADER_SIZE,
    TRAILER_SIZE,
    BlockHeader,
    BlockHeaderV2,
    BlockHeaderV3,
    BlockLayout,
    SectionHeader,
    Trailer,
    align8,
)
from .index import BlockIndex, key_chunk_qualifiers
from .point import file_row_cells, file_rows_cells
from .reader_check import check_blocks
from .reader_scans import BlockPart, FileScans
from .scanner import StoreFileScanner

__all__ = ["StoreFileReader", "PREFETCH_MODES"]


PREFETCH_MODES = ("shared", "thread_local")


_PREADV = getattr(os, "preadv", None)  # not on every platform: there a read returns bytes
_READ_HEADER = object()  # "no prefetched header: read it separately"


class StoreFileReader:
    """Reads one store file (format version 1, 2 or 3); safe to share between threads.

    ``info`` (:class:`FileInfo`), ``format_version``, ``block_count`` and
    ``block_first_keys`` (sort keys of each block's first cell) come from the
    verified meta sections.  ``counters`` (:class:`ReadCounters`) is shared by every
    thread and scanner of this reader.  ``cache`` is the connection's
    :class:`BlockCache`, or None.

    Its range scans and row counts are a :class:`~storage.storefile.reader_scans.FileScans`
    it holds, made when the meta sections are verified; ``check()`` runs
    :func:`~storage.storefile.reader_check.check_blocks` over its blocks read from disk.
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
        self._io_lock = threading.Lock()
        self._reads_in_flight = 0
        size, version = fs.size_and_version(path)
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
            # A remote file's next block is fetched on a background thread while the caller
            # works on this one.  A local file read with pread (not mapped: REGIONSCAN_MMAP=0)
            # is answered from the page cache in microseconds, less than the hand-off to a
            # thread costs, so its blocks are read by the thread that decodes them, as mapped ones are.
            self._pipelined = self._mapped is None and not isinstance(self._file, pa.OSFile)
            self._open(size, version)
        except BaseException:
            self._file.close()
            raise

    # -- opening -----------------------------------------------------------
    def _open(self, size: int, version: tuple) -> None:
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
        # The block cache's name for this file's blocks.  Path, size and trailer alone are
        # not enough: a table dropped and created again writes the same paths, and a file of
        # the same rows with other values of the same lengths has the same layout (the
        # trailer's checksum covers the layout only), so its blocks would be served from the
        # dropped file's.  The file's version (its stat) and a checksum of its index and info
        # (first and last cells, timestamps) tell them apart; as one string, whose hash Python
        # keeps, every block lookup hashes the key as cheaply as before.
        stamp = ".".join(str(v) for v in version) + f"/{crc32(meta):08x}"
        self.file_id = (where, size, bytes(memoryview(raw)[-4:]).hex(), stamp)
        self._index = index
        self.point_first_rows = None  # the blocks' first rows for multi-gets (storefile/point.py), pinned
        self.point_plan = None  # what point reads look up per call (storefile/point.py), made on the first
        self._codec = codec
        self._bloom: RowBloomFilter | None = bloom
        self._data_end = trailer.index_offset
        self.format_version: int = trailer.format_version
        self._hsize = (BLOCK_V3_HEADER_SIZE if trailer.format_version >= 3
                       else BLOCK_V2_HEADER_SIZE if trailer.format_version == 2 else BLOCK_HEADER_SIZE)
        if index.row_counts is not None and index.rows_in_blocks(0, len(index)) != info.row_count:
            raise CorruptionError("block index row counts disagree with the file info", where, trailer.index_offset)
        self._scans = FileScans(index, info, self.format_version, self._pipelined, self._block, self._next_block,
                                self._load_keys, self.block_source, self._load_columns)

    def block_source(self) -> BlockSource:
        """This file's blocks for the batched key-run reader (storage.storefile._key_runs):
        a new object per scan, so the reader and it hold no reference cycle."""
        return BlockSource(
            where=self._where, index=self._index, codec=self._codec, cache=self._cache, counters=self.counters,
            file_id=self.file_id, family=self.info.family, read=self._read, load_keys=self._load_keys,
            header_v2=self._header_v2, mapped=lambda: self._mapped, closed=lambda: self._closed,
            pipelined=self._pipelined,
        )

    # -- raw reads ---------------------------------------------------------
    def _read(self, offset: int, nbytes: int, block: bool = False) -> pa.Buffer:
        if self._closed:
            raise StorageError(f"store file reader of {self._where} is closed")
        if self._mapped is not None:
            end = min(offset + nbytes, self._size)
            buf = self._mapped.slice(offset, max(end - offset, 0))
        elif not self._pipelined and _PREADV is not None:
            buf = self._pread(offset, nbytes)
        else:
            buf = pa.py_buffer(self._file.read_at(nbytes, offset))
        self.counters.add_read(buf.size, block)
        if buf.size != nbytes:
            raise CorruptionError(f"short read ({buf.size} of {nbytes} bytes; truncated file?)", self._where, offset)
        return buf

    def _pread(self, offset: int, nbytes: int) -> pa.Buffer:
        """``nbytes`` at ``offset`` of a local file, read straight into a buffer of Arrow's pool,
        which keeps its pages for the next read (a ``bytes`` per read costs a copy and fresh pages).
        The descriptor is a bare number: a reader closed meanwhile closes it only once the reads
        in flight are done, so none can read another file that reused the number."""
        with self._io_lock:
            if self._closed:
                raise StorageError(f"store file reader of {self._where} is closed")
            self._reads_in_flight += 1
        try:
            buf = pa.allocate_buffer(nbytes)
            got = _PREADV(self._file.fileno(), [memoryview(buf)], offset)
        finally:
            with self._io_lock:
                self._reads_in_flight -= 1
                last = self._closed and not self._reads_in_flight
            if last:
                self._file.close()
        return buf if got == nbytes else buf.slice(0, got)

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
        if self.format_version >= 3:
            header = self._header_v2(header_raw, i)
            decoded = decode_block_v3(header, self._index.chunks.entries(i), body, hsize, self._codec,
                                      self.info.family, self._where, offset)
            if isinstance(decoded, DenseBlock):
                block = Block(i, offset, length, None, decoded, self.info.family)
            else:
                block = Block(i, offset, length, decoded)
        elif self.format_version == 2:
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
            self._cache_block(key, block)
            block.on_grow = self._recharge
            self._supersede(offset, "columns", "keys")
        return block

    def _supersede(self, offset: int, *parts: str) -> None:
        """Drop the block at ``offset``'s entries of ``parts`` (``"keys"``, ``"columns"``): an
        entry just cached holds all they hold, and a second entry would charge the cache
        again for the same keys (lookups of keys and columns fall through to the larger entry)."""
        for part in parts:
            self._cache.discard((self.file_id, offset, part))

    def _recharge(self, block: Block) -> None:
        """Charge a cached block for all it holds now (with its point-read form)."""
        self._recharge_entry((self.file_id, block.offset), block)

    def _recharge_entry(self, key: tuple, block: Block) -> None:
        """Charge the cache entry ``key`` (if it still holds ``block``) for all the block holds now."""
        extra = block.point.nbytes if block.point is not None else 0
        self._cache.recharge(key, block, block.nbytes + extra)

    def _cache_block(self, key: tuple, block: Block) -> None:
        """Put ``block`` in the cache under ``key``; a dense block tells the cache when it builds
        its plain timestamps (:meth:`DenseBlock.footprint`), so it is charged for them then."""
        if block.dense is not None:
            # the hook holds the key, not the block: a block holding its own hook would be a
            # reference cycle, and an evicted block's buffers would wait for the garbage collector
            block.dense.on_grow = functools.partial(self._recharge_dense, key)
        self._cache.put(key, block, block.nbytes)

    def _recharge_dense(self, key: tuple, dense: DenseBlock) -> None:
        """A cached dense block grew: charge its entry ``key`` for all it holds now, if the entry
        is still that block's."""
        block = self._cache.peek(key)
        if block is not None and block.dense is dense:
            self._recharge_entry(key, block)

    def _check_header(self, header: BlockHeader, i: int, offset: int, length: int) -> None:
        idx = self._index
        prev = idx.offsets[i - 1] if i else -1
        if BLOCK_HEADER_SIZE + header.on_disk_size != length or header.prev_offset != prev:
            raise CorruptionError("data block header disagrees with the block index", self._where, offset)
        if header.cell_count != idx.cell_counts[i]:
            raise CorruptionError("data block cell count disagrees with the block index", self._where, offset)

    def _header_v2(self, raw, i: int) -> BlockHeaderV2 | BlockHeaderV3:
        """Decode a version 2 or 3 block header (the file's version) and check it against the index."""
        idx = self._index
        offset = idx.offsets[i]
        if self.format_version >= 3:
            header = BlockHeaderV3.decode(raw, self._where, offset)
            if header.chunk_count != len(idx.chunks.entries(i)):
                raise CorruptionError("data block chunk count disagrees with the block index", self._where, offset)
        else:
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
            hit = cache.get((self.file_id, offset, "keys"), count_miss=False)
            if hit is None:
                hit = cache.get((self.file_id, offset), count_miss=False)
            if hit is None:  # some columns read: they hold the keys (and superseded the keys entry)
                hit = cache.get((self.file_id, offset, "columns"))
            if hit is not None:
                self.counters.add("cache_hits")
                return hit
            self.counters.add("cache_misses")
        if self.format_version < 2:
            return self._load(i, None, False, cache_blocks)
        hsize = self._hsize
        buf = self._read(offset, idx.key_lengths[i], block=True)
        header = self._header_v2(buf.slice(0, hsize), i)
        if self.format_version >= 3:
            keys = decode_key_chunk(header, buf, 0, idx.chunks.entries(i)[0], self._codec, self._where, offset)
            check_chunk_count(header, keys, self._where, offset)
        else:
            keys = decode_keys(header, buf.slice(hsize), self._codec, self._where, offset)
        family = self.info.family
        if isinstance(keys, DenseBlock):
            block = Block(i, offset, idx.lengths[i], None, keys, family, keys_only=True)
        else:
            block = Block(i, offset, idx.lengths[i], cells_with(keys, None, family), keys_only=True)
        if cache_blocks and cache is not None:
            self._cache_block((self.file_id, offset, "keys"), block)
        return block

    def _load_columns(self, i: int, qualifiers, cache_blocks: bool = True) -> Block:
        """Block ``i`` with the value columns of ``qualifiers`` (those it has: a set, or a
        ``dense_rows.ColumnsWhere`` testing each; only ``in`` is asked) decoded and
        the others not read (``None`` in its dense block's ``values``): in a version 3
        file only the header, the key chunk and those value chunks are read (one read for
        the header and key chunk, one per run of adjacent wanted chunks), verified and
        decoded.  A cached whole block serves, and so does a cached block of some of its
        columns that has them all; one that lacks some (or a cached keys-only block) has
        only the missing chunks read and is replaced by the union (cached as the whole
        block once it has every column).  Files of older versions and ``CELLS`` blocks are
        read whole (:meth:`_load`)."""
        idx = self._index
        if self.format_version < 3 or idx.layouts[i] != BlockLayout.DENSE:
            return self._load(i, None, True, cache_blocks)
        offset = idx.offsets[i]
        cache = self._cache
        part_key = (self.file_id, offset, "columns")
        base = None
        if cache is not None:
            hit = cache.get((self.file_id, offset), count_miss=False)
            if hit is None:
                base = cache.get(part_key, count_miss=False)
                if base is None:
                    base = cache.get((self.file_id, offset, "keys"), count_miss=False)
            else:
                base = hit
            if base is not None and base.dense is not None and base.dense.read_values is not None:
                values = base.dense.read_values
                if all(v is not None for q, v in zip(base.dense.qualifiers, values) if q in qualifiers):
                    self.counters.add("cache_hits")
                    return base
        if base is not None and base.dense is not None:
            keys = base.dense
        else:
            keys = None
        if cache is not None:
            self.counters.add("cache_misses")
        entries = idx.chunks.entries(i)
        codec, where = self._codec, self._where
        if keys is None:
            buf = self._read(offset, idx.key_lengths[i], block=True)
            header = self._header_v2(buf.slice(0, self._hsize), i)
            keys = decode_key_chunk(header, buf, 0, entries[0], codec, where, offset)
            check_chunk_count(header, keys, where, offset)
        values = list(keys.read_values) if keys.read_values is not None else [None] * len(keys.qualifiers)
        wanted = [j + 1 for j, q in enumerate(keys.qualifiers) if q in qualifiers and values[j] is None]
        for a, b in chunk_runs(entries, wanted):
            start = entries[a][0]
            buf = self._read(offset + start, entries[b][0] + align8(entries[b][1]) - start, block=True)
            for k in range(a, b + 1):
                values[k - 1] = decode_value_chunk(keys, k - 1, buf, start, entries[k], codec, where, offset)
        dense = DenseBlock(keys.rows, keys.qualifiers, keys.timestamps, values, keys.cell_count())
        block = Block(i, offset, idx.lengths[i], None, dense, self.info.family)
        if cache_blocks and cache is not None:
            if dense.complete:  # every column read: the whole block, as a full read caches it
                self._cache_block((self.file_id, offset), block)
                block.on_grow = self._recharge
                self._supersede(offset, "columns", "keys")
            else:
                self._cache_block(part_key, block)
                self._supersede(offset, "keys")
        return block

    def chunk_stats(self, qualifier: bytes, first: int = 0, last: int | None = None) -> tuple[list, list] | None:
        """Per block, the bytewise least and greatest value of ``qualifier`` as recorded in a
        version 3 file's block index: ``(min, max)``, two lists of one entry per block, None
        where the block lacks the qualifier or its chunk records no bounds (values of mixed
        widths; a ``CELLS`` block).  The bounds compare values as unsigned bytes, so they order
        values whose encoding sorts bytewise (the ordered encodings, fixed-width big-endian
        unsigned numbers).  None for a file of an older version.  Reading a block's key chunk
        tells which chunk holds the qualifier, so each block's bounds cost one key chunk read
        (cached) the first time; a block none of whose chunks records bounds costs none.
        ``first``..``last`` (inclusive; None: the last block) limit the blocks reported."""
        if not isinstance(qualifier, bytes):
            raise InvalidArgument(f"qualifier must be bytes, got {qualifier!r}")
        if self.format_version < 3:
            return None
        idx = self._index
        lows: list = []
        highs: list = []
        for i in range(first, len(idx) if last is None else last + 1):
            k = None
            if idx.layouts[i] == BlockLayout.DENSE and any(e[6] is not None for e in idx.chunks.entries(i)[1:]):
                quals = self._load_keys(i, True).dense.qualifiers
                if qualifier in quals:
                    k = quals.index(qualifier) + 1
            entry = idx.chunks.entries(i)[k] if k is not None else None
            lows.append(entry[6] if entry is not None else None)
            highs.append(entry[7] if entry is not None else None)
        return lows, highs

    def block_value_bounds(self, i: int) -> list[tuple[bytes | None, bytes | None]] | None:
        """Block ``i``'s value-chunk bounds as the block index records them (no read): one
        ``(min, max)`` per value chunk, in chunk order (that of :meth:`block_qualifiers`),
        ``(None, None)`` for a chunk without bounds (values of mixed widths).  None for a block
        no chunk of which records bounds, a ``CELLS`` block and every block of a file of an
        older version than 3: there is nothing to learn its qualifiers for."""
        idx = self._index
        if not 0 <= i < len(idx):
            raise InvalidArgument(f"block {i} is out of range: {self._where} has {len(idx)} blocks")
        if self.format_version < 3 or idx.layouts[i] != BlockLayout.DENSE:
            return None
        values = idx.chunks.entries(i)[1:]
        if all(e[6] is None for e in values):
            return None
        return [(e[6], e[7]) for e in values]

    def block_qualifiers(self, i: int, *, decode_keys: bool) -> tuple[bytes, ...]:
        """The qualifiers of block ``i`` (a ``DENSE`` block of a version 3 file) in value-chunk
        order: which chunk holds which column, what the block index does not record but the
        qualifier table opening the block's key chunk does.

        A block the cache holds (whole, some of its columns, or its keys) answers without a
        read.  Otherwise, with ``decode_keys`` the key chunk is decoded whole and cached, for a
        scan that reads the block next to find; without, it is read, verified against its
        checksum and decompressed, and only the qualifier table parsed: no key is rebuilt and
        nothing is cached (for a block a scan skips)."""
        idx = self._index
        if not 0 <= i < len(idx):
            raise InvalidArgument(f"block {i} is out of range: {self._where} has {len(idx)} blocks")
        if self.format_version < 3 or idx.layouts[i] != BlockLayout.DENSE:
            raise InvalidArgument(f"block {i} of {self._where} is not a DENSE block of a version 3 file")
        if decode_keys:
            return tuple(self._load_keys(i, True).dense.qualifiers)
        offset = idx.offsets[i]
        cache = self._cache
        if cache is not None:
            for key in ((self.file_id, offset), (self.file_id, offset, "columns"), (self.file_id, offset, "keys")):
                hit = cache.get(key, count_miss=False) if key in cache else None
                if hit is not None and hit.dense is not None:
                    return tuple(hit.dense.qualifiers)
        entry = idx.chunks.entries(i)[0]
        at = offset + entry[0]
        return tuple(key_chunk_qualifiers(self._read(at, align8(entry[1]), block=True), entry, self._codec,
                                          self._where, at))

    def cached_block(self, i: int) -> Block | None:
        """Block ``i`` if the block cache holds it (no read), else None."""
        cache = self._cache
        if cache is None:
            return None
        hit = cache.get((self.file_id, self._index.offsets[i]), count_miss=False)
        if hit is not None:
            self.counters.add("cache_hits")
        return hit

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
        a block the row is found by a binary search of its row-key column and
        read as one entry of each column (:mod:`storage.storefile.point`).
        """
        return file_row_cells(self, row)

    def rows_cells(self, rows: list[bytes]) -> dict[bytes, list[Cell]]:
        """The cells of each of ``rows`` (distinct, ascending) in this file, for
        the rows it holds: a multi-get, one visit per block (see
        :func:`storage.storefile.point.file_rows_cells`)."""
        return file_rows_cells(self, rows)

    @property
    def block_row_starts(self):
        """Per block, where its first row begins (0: the block begins with a new
        row, nothing of it in the block before); None for a version 1 file."""
        return self._index.row_starts

    @property
    def block_cache(self) -> "BlockCache | None":
        """The block cache this reader loads into (shared by the connection), or None."""
        return self._cache

    @property
    def bloom(self) -> RowBloomFilter | None:
        """The file's row bloom filter (pinned with the reader), or None."""
        return self._bloom

    def read_block(self, i: int) -> pa.RecordBatch:
        """Data block ``i`` as a ``CELL_SCHEMA`` batch (verified, decompressed, cached)."""
        if not isinstance(i, int) or not 0 <= i < self.block_count:
            raise InvalidArgument(f"block number must be in [0, {self.block_count}), got {i!r}")
        return self._block(i).batch

    # -- range scans and counts (storage.storefile.reader_scans) ---------------
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
        return self._scans.scan_batches(start_row, stop_row, reverse, cache_blocks=cache_blocks, keys_only=keys_only)

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
        """The blocks of rows in ``[start_row, stop_row)``, forward, as
        :class:`~storage.storefile.reader_scans.BlockPart` pieces: dense blocks
        stay columns (a row slice of them), the others are cell batches.
        ``keys_only`` reads only the key sections of a version 2 file (values
        come out empty), and a run of consecutive dense blocks of up to
        ``run_rows`` rows then comes out as one part (one decode for the run).
        ``columns`` (qualifiers, or a ``dense_rows.ColumnsWhere`` testing each; None: all)
        are the value columns the caller reads: in a version 3 file only their chunks are read, and the dense parts' other
        value columns are None (never to be taken for absent cells); a part of a
        row cut across blocks is read whole."""
        return self._scans.scan_parts(start_row, stop_row, cache_blocks=cache_blocks, keys_only=keys_only,
                                      run_rows=run_rows, columns=columns)

    def count_rows(self, start_row: bytes | None = None, stop_row: bytes | None = None) -> int:
        """Distinct rows of the file in ``[start_row, stop_row)``, delete markers
        and versions not considered (a clean file's visible row count).

        In a version 2 file the blocks wholly inside the range are counted from
        the block index alone; only the (at most two) blocks at the range's
        ends are read, for their keys.  A version 1 file is read for its keys.
        """
        return self._scans.count_rows(start_row, stop_row)

    # -- integrity (storage.storefile.reader_check) --------------------------
    def check(self) -> None:
        """Verify every invariant of the file, reading every block from disk.

        Checksums of all blocks (the meta sections were verified at open),
        block order and agreement with the index, cell order within and
        across blocks, family, cell/row/block counts, first/last cell,
        timestamp bounds and that the bloom filter holds every row.
        Raises :class:`CorruptionError` naming the file and offset.
        """
        check_blocks(self.info, self._where, self._blocks_from_disk(), self.block_first_keys, self._bloom,
                     self._data_end)

    def _blocks_from_disk(self) -> Iterator[Block]:
        """Every data block in file order, read sequentially past the block cache
        (a version 3 block's value statistics checked against its values)."""
        block = self._block(0, cache_blocks=False, use_cache=False) if self.block_count else None
        while block is not None:
            if self.format_version >= 3 and block.dense is not None:
                self._check_value_stats(block)
            yield block
            block = self._next_block(block, cache_blocks=False, use_cache=False)

    def _check_value_stats(self, block: Block) -> None:
        """CorruptionError unless each value chunk's recorded bytewise bounds are its values'."""
        dense = block.dense
        for j, entry in enumerate(self._index.chunks.entries(block.index)[1:]):
            if entry[6] is None and entry[7] is None:
                continue
            bounds = pc.min_max(dense.value(j)).as_py()
            if (bounds["min"], bounds["max"]) != (entry[6], entry[7]):
                raise CorruptionError("value chunk statistics disagree with its values", self._where,
                                      block.offset + entry[0])

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
        return StoreFileScanner(self, cache_blocks=cache_blocks)

    # -- lifecycle ---------------------------------------------------------
    def close(self) -> None:
        """Close the file.  Batches already returned stay valid."""
        with self._io_lock:
            if self._closed:
                return
            self._closed = True
            self._mapped = None
            busy = self._reads_in_flight  # the last of them closes the file (see _pread)
        if not busy:
            self._file.close()
        self._scans.detach(self._where)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "StoreFileReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StoreFileReader({self._where!r}, blocks={self.block_count}, cells={self.info.cell_count})"
