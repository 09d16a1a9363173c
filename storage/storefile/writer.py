"""StoreFileWriter: builds one immutable store file.

Cells arrive in sort order, one at a time (:meth:`StoreFileWriter.append`)
or as Arrow batches (:meth:`StoreFileWriter.append_batch`).  They are cut
into data blocks of about ``block_size`` uncompressed bytes at cell
boundaries and written as they fill; :meth:`StoreFileWriter.finish` adds the
index, the bloom filter, the file info and the trailer.
"""

from __future__ import annotations

import posixpath

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import CELL_SCHEMA, Cell, cells_to_batch
from ..errors import InvalidArgument
from ..vfs.fs import FileSystem
from ._block_v2 import encode_block_v2
from ._block_v3 import encode_block_v3
from .block_cells import CELL_OVERHEAD, cell_at, cell_sizes, key_at, key_run_end
from ..kernels.order import first_unsorted, row_starts
from .bloom import RowBloomFilter, row_hash_pairs
from .codecs import AUTO, BlockCodec, auto_codec, get_codec
from .dense import dense_from_cells
from .fileinfo import FileInfo
from .format import (
    BLOOM_MAGIC,
    DEFAULT_BLOCK_SIZE,
    DEFAULT_ROW_GROUP_SIZE,
    FORMAT_VERSION,
    INDEX_MAGIC,
    INFO_MAGIC,
    SectionHeader,
    Trailer,
)
from .index import IndexBuilder
from .writer_rows import MAX_BODY, WriterRows

__all__ = ["StoreFileWriter", "COMPRESSED_CELL_BLOCK_SIZE", "LZ4_CELL_BLOCK_SIZE"]


class StoreFileWriter(WriterRows):
    """Writes one store file of one column family.

    Contract:

    * cells are added in :func:`storage.cells.sort_key` order (equal keys are
      allowed; a key that sorts before the previous one raises
      :class:`InvalidArgument` and leaves the writer as it was);
    * every cell's family is ``family``;
    * then call :meth:`finish` (writes the index, bloom filter, file info and
      trailer, fsyncs and closes) or :meth:`abandon` (closes and deletes the
      partial file).  Until ``finish`` returns the file is not a store file.
      After either, the writer accepts no more calls (``abandon`` after
      ``finish`` does nothing, so ``try: ... finish() except: abandon()``
      is safe).

    ``block_size`` is the target uncompressed bytes per data block: a block
    is closed after the cell that reaches it (so one large cell makes one
    large block), and never between two cells with equal keys.
    ``compression`` is a codec name from :data:`codecs.CODECS`, None, or
    :data:`codecs.AUTO` (a family's default): the file's first block chooses,
    zstd when it is dense (a row group, a flush of single-version rows), lz4
    when it is a block of cells (versions, delete markers); every block of a
    file has the file's codec.
    ``bloom`` adds a row bloom filter (files without rows get none).
    Files are written in format version :data:`format.FORMAT_VERSION` (3:
    column chunks) unless ``format_version`` asks for 2 (kept for tests and
    comparisons); readers still read version 1 files, which the engine no
    longer writes.  ``row_group_size`` is the target uncompressed bytes of a
    block written from rows (:meth:`append_rows`); by default
    :data:`format.DEFAULT_ROW_GROUP_SIZE`, or ``block_size`` when that is
    below the default block size (a family asking for small blocks).
    ``cell_block_size`` is where blocks cut from cells (:meth:`append`,
    :meth:`append_batch`) end: ``block_size``, except in a compressed file
    whose ``block_size`` is at least the default, where it is at least
    :data:`LZ4_CELL_BLOCK_SIZE` with lz4 and :data:`COMPRESSED_CELL_BLOCK_SIZE`
    with the other codecs (a codec costs per block far more than per byte on
    small blocks; ``block_size`` still goes into the file info).  An
    :data:`codecs.AUTO` file cuts its first block at the lz4 size, then at its
    codec's.
    """

    def __init__(
        self,
        fs: FileSystem,
        path: str,
        *,
        family: bytes,
        block_size: int = DEFAULT_BLOCK_SIZE,
        compression: str | None = None,
        bloom: bool = True,
        format_version: int = FORMAT_VERSION,
        row_group_size: int | None = None,
        cell_block_size: int | None = None,
    ):
        if not isinstance(family, bytes):
            raise InvalidArgument(f"family must be bytes, got {family!r}")
        if not isinstance(block_size, int) or isinstance(block_size, bool) or not 1 <= block_size <= MAX_BODY // 2:
            raise InvalidArgument(f"block_size must be an int in [1, {MAX_BODY // 2}], got {block_size!r}")
        if format_version not in (2, 3):
            raise InvalidArgument(f"format_version must be 2 or 3 (version 1 is read only), got {format_version!r}")
        if row_group_size is None:
            row_group_size = block_size if block_size < DEFAULT_BLOCK_SIZE else max(block_size, DEFAULT_ROW_GROUP_SIZE)
        if not isinstance(row_group_size, int) or isinstance(row_group_size, bool) or not 1 <= row_group_size <= MAX_BODY // 2:
            raise InvalidArgument(f"row_group_size must be an int in [1, {MAX_BODY // 2}], got {row_group_size!r}")
        self.row_group_size = row_group_size
        self._encode = encode_block_v3 if format_version == 3 else encode_block_v2
        self.block_size = block_size
        self._codec: BlockCodec | None  # None: an AUTO file before its first block
        if isinstance(compression, str) and compression.lower() == AUTO:
            auto_codec(True), auto_codec(False)  # fail here, not at the first block, if one is missing
            self._codec = None
        else:
            self._codec = get_codec(compression)
        self._cell_block_given = cell_block_size is not None
        if cell_block_size is None:
            cell_block_size = self._cell_target(self._codec or auto_codec(False))
        if not isinstance(cell_block_size, int) or isinstance(cell_block_size, bool) or not 1 <= cell_block_size <= MAX_BODY // 2:
            raise InvalidArgument(f"cell_block_size must be an int in [1, {MAX_BODY // 2}], got {cell_block_size!r}")
        self.cell_block_size = cell_block_size
        self.fs = fs
        self.path = path
        self.family = family
        self._bloom = bool(bloom)
        self.format_version = format_version
        self._file = fs.create(path)
        self._state = "open"
        # Cells appended one by one wait here until they fill a block.
        self._py_cells: list[tuple] = []
        self._py_bytes = 0
        # Arrow chunks not yet written, with the byte size of each cell.
        self._chunks: list[pa.RecordBatch] = []
        self._chunk_sizes: list[np.ndarray] = []
        self._chunk_bytes = 0
        self._last_key: tuple | None = None
        self._appended = 0
        # Rows from append_rows waiting to fill a row group: (rows, qualifiers, values,
        # timestamps, byte sizes, cells per row) per call, and their total byte size.
        self._pending_rows: list[tuple] = []
        self._pending_row_bytes = 0
        # What has been written.
        self._index = IndexBuilder(format_version)
        self._offset = 0
        self._prev_offset = -1
        self._cell_count = 0
        self._row_count = 0
        self._last_row: bytes | None = None
        self._first_cell: Cell | None = None
        self._last_cell: Cell | None = None
        self._min_ts: int | None = None
        self._max_ts: int | None = None
        self._uncompressed = 0
        self._delete_count = 0
        self._repeated_columns = 0
        self._row_lengths: tuple[int, int] | None = None  # shortest and longest row key written
        self._hashes: list[tuple[np.ndarray, np.ndarray]] = []
        self._family_scalar = pa.scalar(family, pa.binary())

    def _cell_target(self, codec: BlockCodec) -> int:
        """Where blocks cut from cells end with ``codec`` when the caller names no size."""
        if codec.name == "none" or self.block_size < DEFAULT_BLOCK_SIZE:
            return self.block_size
        return max(self.block_size, LZ4_CELL_BLOCK_SIZE if codec.name == "lz4" else COMPRESSED_CELL_BLOCK_SIZE)

    def _file_codec(self, dense: bool) -> BlockCodec:
        """The file's codec; an :data:`codecs.AUTO` file takes it from its first block
        (``dense``: that block is a dense one) and cuts later blocks at its size."""
        if self._codec is None:
            self._codec = auto_codec(dense)
            if not self._cell_block_given:
                self.cell_block_size = self._cell_target(self._codec)
        return self._codec

    # -- appending -------------------------------------------------------
    @property
    def cell_count(self) -> int:
        """Cells appended so far."""
        return self._appended

    def append(self, cell: tuple) -> None:
        """Add one cell ``(row, family, qualifier, timestamp, type, value)``."""
        self._check_open()
        if len(cell) != 6:
            raise InvalidArgument(f"a cell is a 6-tuple (row, family, qualifier, timestamp, type, value), got {cell!r}")
        row, family, qualifier, ts, kind, value = cell
        if family != self.family:
            raise InvalidArgument(f"cell family {family!r} differs from the file's family {self.family!r}")
        if not (type(row) is bytes and type(qualifier) is bytes and type(value) is bytes):
            raise InvalidArgument(f"row, qualifier and value must be bytes, got {cell!r}")
        if not (isinstance(ts, int) and isinstance(kind, int) and 0 <= kind <= 255):
            raise InvalidArgument(f"timestamp must be an int and type an int in [0, 255], got {cell!r}")
        key = (row, family, qualifier, -ts, -kind)
        if self._last_key is not None and key < self._last_key:
            raise InvalidArgument(f"cell {cell!r} sorts before the previous cell (key {self._last_key!r})")
        self._flush_rows()
        self._py_cells.append(cell)
        self._last_key = key
        self._appended += 1
        self._py_bytes += len(row) + len(family) + len(qualifier) + len(value) + CELL_OVERHEAD
        if self._chunk_bytes + self._py_bytes >= self.cell_block_size:
            self._flush_py()
            self._cut(final=False)

    def append_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Add a batch of cells with ``CELL_SCHEMA`` columns, in sort order.

        Order, family and nulls are checked with vectorized kernels over the
        whole batch, plus one comparison at the boundary with what came
        before; on any violation nothing of the batch is added.
        """
        self._check_open()
        if isinstance(batch, pa.Table):
            for part in batch.to_batches():
                self.append_batch(part)
            return
        if not isinstance(batch, pa.RecordBatch):
            raise InvalidArgument(f"append_batch takes a pyarrow RecordBatch or Table, got {type(batch).__name__}")
        batch = _conform(batch)
        n = batch.num_rows
        if n == 0:
            return
        fam = batch.column("family")
        same = pc.equal(fam, self._family_scalar)
        if not pc.all(same).as_py():
            bad = int(np.flatnonzero(~same.to_numpy(zero_copy_only=False))[0])
            raise InvalidArgument(
                f"cell {bad} of the batch has family {fam[bad].as_py()!r}, the file's family is {self.family!r}"
            )
        bad = first_unsorted(batch)
        if bad is not None:
            raise InvalidArgument(
                f"batch is not sorted: cell {bad} (key {key_at(batch, bad)!r}) sorts before cell {bad - 1} "
                f"(key {key_at(batch, bad - 1)!r})"
            )
        first = key_at(batch, 0)
        if self._last_key is not None and first < self._last_key:
            raise InvalidArgument(
                f"batch starts with key {first!r}, which sorts before the previous cell (key {self._last_key!r})"
            )
        self._flush_rows()
        self._flush_py()
        sizes = cell_sizes(batch)
        self._chunks.append(batch)
        self._chunk_sizes.append(sizes)
        self._chunk_bytes += int(sizes.sum())
        self._last_key = key_at(batch, n - 1)
        self._appended += n
        if self._chunk_bytes >= self.cell_block_size:
            self._cut(final=False)

    # -- block cutting ---------------------------------------------------
    def _flush_py(self) -> None:
        if not self._py_cells:
            return
        batch = cells_to_batch(self._py_cells)
        self._chunks.append(batch)
        self._chunk_sizes.append(cell_sizes(batch))
        self._chunk_bytes += self._py_bytes
        self._py_cells = []
        self._py_bytes = 0

    def _cut(self, final: bool) -> None:
        """Write every full block of the pending cells (and the rest if ``final``)."""
        if not self._chunks:
            return
        combined = self._chunks[0] if len(self._chunks) == 1 else pa.concat_batches(self._chunks)
        sizes = self._chunk_sizes[0] if len(self._chunk_sizes) == 1 else np.concatenate(self._chunk_sizes)
        cum = np.cumsum(sizes)
        n = combined.num_rows
        starts = row_starts(combined.column("row"))
        start, base = 0, 0
        while start < n:
            # The block ends with the first cell whose running size reaches the target.
            end = int(np.searchsorted(cum, base + self.cell_block_size, side="left")) + 1
            if end >= n and not final:
                break  # the pending cells may end inside a row that the next append continues
            if end > n:
                end = n
                row_end = n
            else:
                # Prefer to end the block with its last row, so scans can hand
                # blocks to the kernels whole; only a row far wider than a
                # block is cut inside (at a key boundary, below).
                k = int(np.searchsorted(starts, end, side="left"))
                row_end = int(starts[k]) if k < len(starts) else n
            if end < n and row_end != end and cum[row_end - 1] - base <= _ROW_SPAN_LIMIT * self.cell_block_size:
                if row_end == n and not final:
                    break
                end = row_end
            elif end < n and key_at(combined, end - 1) == key_at(combined, end):
                end = key_run_end(combined, end)  # equal keys stay in one block
                if end == n and not final:
                    break
            self._write_block(combined.slice(start, end - start))
            start, base = end, int(cum[end - 1])
        if start < n:
            self._chunks = [combined.slice(start)]
            self._chunk_sizes = [sizes[start:]]
            self._chunk_bytes = int(cum[-1]) - base
        else:
            self._chunks, self._chunk_sizes, self._chunk_bytes = [], [], 0

    def _write_block(self, block: pa.RecordBatch) -> None:
        n = block.num_rows
        offset = self._offset
        first = cell_at(block, 0)
        rows = block.column("row")
        starts = row_starts(rows)
        continues = self._last_row is not None and first[0] == self._last_row  # the row began in the previous block
        length, raw_size = self._write_body(block, offset, first, starts, continues)
        self._prev_offset = offset
        self._offset += length
        self._uncompressed += raw_size
        self._cell_count += n
        if self._first_cell is None:
            self._first_cell = first
        self._count_versions_and_markers(block, first)
        self._last_cell = cell_at(block, n - 1)
        bounds = pc.min_max(block.column("timestamp")).as_py()
        self._min_ts = bounds["min"] if self._min_ts is None else min(self._min_ts, bounds["min"])
        self._max_ts = bounds["max"] if self._max_ts is None else max(self._max_ts, bounds["max"])
        distinct = rows.take(pa.array(starts))
        if continues:
            distinct = distinct.slice(1)  # the row continues from the previous block
        self._row_count += len(distinct)
        self._note_row_lengths(rows)
        if self._bloom and len(distinct):
            self._hashes.append(row_hash_pairs(distinct))
        self._last_row = self._last_cell[0]

    def _write_body(self, block: pa.RecordBatch, offset: int, first: Cell, starts: np.ndarray,
                    continues: bool) -> tuple[int, int]:
        """Write one data block at ``offset`` and add its index entry; returns the bytes
        written and the block's uncompressed size.  ``starts``: where its rows start;
        ``continues``: its first row began in the previous block."""
        n = block.num_rows
        # an AUTO file's first block chooses the file's codec by its layout
        dense = dense_from_cells(block) if self._codec is None else None
        enc = self._encode(block, self._prev_offset, self._file_codec(dense is not None), len(starts), dense=dense)
        if enc.raw_size > MAX_BODY:
            raise InvalidArgument(f"a data block of {enc.raw_size} bytes is too large (cells over 4 GiB?)")
        # one write per block (a version 3 block is many chunks: a write each would be
        # many small calls into the file system)
        self._file.write(b"".join(enc.parts))
        row_start = (int(starts[1]) if len(starts) > 1 else n) if continues else 0
        self._index.add(offset, enc.length, enc.key_length, enc.layout, n, len(starts), row_start, first, enc)
        return enc.length, enc.raw_size

    def _note_row_lengths(self, rows: pa.Array) -> None:
        """Widen the shortest/longest row key written by one block's keys (one Arrow kernel)."""
        bounds = pc.min_max(pc.binary_length(rows)).as_py()
        if bounds["min"] is None:
            return
        if self._row_lengths is None:
            self._row_lengths = (bounds["min"], bounds["max"])
        else:
            self._row_lengths = (min(self._row_lengths[0], bounds["min"]), max(self._row_lengths[1], bounds["max"]))

    def _count_versions_and_markers(self, block: pa.RecordBatch, first: Cell) -> None:
        """Count delete markers and repeated (row, qualifier) cells, once per block,
        so readers know whether a file needs version and delete resolution."""
        n = block.num_rows
        types = block.column("type").to_numpy(zero_copy_only=False)
        self._delete_count += int(np.count_nonzero(types != 4))
        if n > 1:
            rows, quals = block.column("row"), block.column("qualifier")
            same = pc.and_(
                pc.equal(rows.slice(1), rows.slice(0, n - 1)), pc.equal(quals.slice(1), quals.slice(0, n - 1))
            )
            self._repeated_columns += int(pc.sum(same).as_py() or 0)
        last = self._last_cell
        if last is not None and last[0] == first[0] and last[2] == first[2]:
            self._repeated_columns += 1

    # -- lifecycle ---------------------------------------------------------
    def _check_open(self) -> None:
        if self._state != "open":
            raise InvalidArgument(f"store file writer for {self.path} is already {self._state}")

    def finish(self, max_seq_id: int = 0) -> FileInfo:
        """Write the remaining blocks, index, bloom filter, file info and trailer;
        fsync and close.  Returns the file's :class:`FileInfo`.

        If writing fails the partial file is deleted (as by :meth:`abandon`).
        """
        self._check_open()
        if not isinstance(max_seq_id, int) or isinstance(max_seq_id, bool) or max_seq_id < 0:
            raise InvalidArgument(f"max_seq_id must be a non-negative int, got {max_seq_id!r}")
        try:
            self._flush_rows()
            self._flush_py()
            self._cut(final=True)
            codec = self._file_codec(True)  # decided by now unless the file has no block
            data_end = self._offset
            index = SectionHeader.frame(INDEX_MAGIC, self._index.encode())
            bloom_section = b""
            policy = None
            if self._bloom and self._row_count:
                h1 = np.concatenate([h[0] for h in self._hashes])
                h2 = np.concatenate([h[1] for h in self._hashes])
                filt = RowBloomFilter.build(h1, h2)
                policy = filt.POLICY
                bloom_section = SectionHeader.frame(BLOOM_MAGIC, filt.encode())
            info = FileInfo(
                first_cell=self._first_cell,
                last_cell=self._last_cell,
                cell_count=self._cell_count,
                row_count=self._row_count,
                min_timestamp=self._min_ts,
                max_timestamp=self._max_ts,
                max_seq_id=max_seq_id,
                family=self.family,
                compression=None if codec.name == "none" else codec.name,
                block_count=len(self._index),
                block_size=self.block_size,
                format_version=self.format_version,
                file_size=0,
                has_bloom=policy is not None,
                bloom_policy=policy,
                data_size=data_end,
                uncompressed_size=self._uncompressed,
                delete_count=self._delete_count,
                repeated_columns=self._repeated_columns,
                min_row_length=self._row_lengths[0] if self._row_lengths else 0,
                max_row_length=self._row_lengths[1] if self._row_lengths else 0,
            )
            info_section = SectionHeader.frame(INFO_MAGIC, info.to_json())
            bloom_offset = data_end + len(index) if bloom_section else 0
            info_offset = data_end + len(index) + len(bloom_section)
            trailer = Trailer(
                compression=codec.code,
                block_count=len(self._index),
                index_offset=data_end,
                index_length=len(index),
                bloom_offset=bloom_offset,
                bloom_length=len(bloom_section),
                info_offset=info_offset,
                info_length=len(info_section),
                format_version=self.format_version,
            ).encode()
            self._file.write(index + bloom_section + info_section + trailer)
            self._file.sync()
            self._file.close()
            # The new directory entry must be durable before a manifest names it.
            self.fs.sync_dir(posixpath.dirname(self.path))
        except BaseException:
            self.abandon()
            raise
        self._state = "finished"
        self._chunks, self._chunk_sizes, self._hashes = [], [], []
        return info.with_file_size(info_offset + len(info_section) + len(trailer))

    def abandon(self) -> None:
        """Close and delete the partial file.  Does nothing after finish or a first abandon."""
        if self._state != "open":
            return
        self._state = "abandoned"
        self._chunks, self._chunk_sizes, self._hashes, self._py_cells = [], [], [], []
        self._pending_rows = []
        try:
            self._file.close()
        finally:
            self.fs.delete(self.path, missing_ok=True)

    def __enter__(self) -> "StoreFileWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abandon()
        elif self._state == "open":
            self.abandon()
            raise InvalidArgument(f"store file writer for {self.path} left without finish(); the file was deleted")


_ROW_SPAN_LIMIT = 4  # a block may grow to this many times its target size to end at a row boundary

COMPRESSED_CELL_BLOCK_SIZE = 1 << 20
"""The least size of a block cut from cells in a compressed file (lz4 aside: :data:`LZ4_CELL_BLOCK_SIZE`)
of a family with the default ``block_size`` or more.  A scan that does not cache blocks decompresses every block: zstd on
64 KiB blocks of a three-version table took 2.2x the time of 1 MiB ones, while a cold point read
of a 1 MiB block costs about what one of a default row group does.  Measured in
docs/decisions/2026-12-05-benchmark-regressions.md."""


LZ4_CELL_BLOCK_SIZE = 256 << 10
"""The least size of a block cut from cells in an lz4 file of a family with the default ``block_size``
or more: lz4 costs less per block than zstd, and a cold point read decompresses a quarter of
what a 1 MiB block costs it.  Measured in docs/decisions/2026-12-05-benchmark-regressions.md."""


def _conform(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with exactly ``CELL_SCHEMA`` (casting compatible types), no nulls."""
    if batch.schema.names != CELL_SCHEMA.names:
        raise InvalidArgument(f"batch columns must be {CELL_SCHEMA.names}, got {batch.schema.names}")
    columns = []
    for field, col in zip(CELL_SCHEMA, batch.columns):
        if col.null_count:
            raise InvalidArgument(f"column {field.name!r} of the batch has nulls")
        if col.type != field.type:
            try:
                col = col.cast(field.type)
            except (pa.ArrowException, ValueError) as exc:
                raise InvalidArgument(f"column {field.name!r} has type {col.type}, expected {field.type} ({exc})") from None
        columns.append(col)
    return pa.RecordBatch.from_arrays(columns, schema=CELL_SCHEMA)
