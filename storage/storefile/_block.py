"""Verified decoding of one version 1 data block (files are written in version
2 now, :mod:`storage.storefile._block_v2`; version 1 files stay readable).

A block is a 40-byte :class:`BlockHeader` followed by its body: an Arrow IPC
record batch message of ``CELL_SCHEMA``, compressed as a whole by the file's
codec.  Decoding is ``pyarrow.ipc.read_record_batch`` on the (decompressed)
buffer, so the cells become Arrow arrays without a Python loop; for an
uncompressed local file the arrays point into the memory-mapped file.
"""

from __future__ import annotations

import pyarrow as pa

from ..cells import CELL_SCHEMA
from ..errors import CorruptionError, StorageError
from .cache import arrow_footprint
from .codecs import BlockCodec
from .format import BLOCK_HEADER_SIZE, BlockHeader, checksum

__all__ = ["Block", "decode_body"]


class Block:
    """A decoded data block with its place in the file (immutable once built).

    ``batch`` is the block's cells (``CELL_SCHEMA``).  A version 2 dense block
    keeps its columns in ``dense`` (a :class:`DenseBlock`) and builds the cell
    batch each time a caller asks for it, without keeping it: the decoded
    form is held once, and the paths that want cells (the cell-at-a-time
    scanner, reverse scans) ask once per block visit.  ``keys_only`` blocks
    were read without their value section: their cells have empty values.
    """

    __slots__ = ("index", "offset", "length", "next_offset", "_batch", "dense", "family", "keys_only", "point", "on_grow")

    def __init__(
        self,
        index: int,
        offset: int,
        length: int,
        batch: pa.RecordBatch | None,
        dense=None,
        family: bytes = b"",
        keys_only: bool = False,
    ):
        self.index = index
        self.offset = offset
        self.length = length  # header + on-disk body (both sections in version 2)
        self.next_offset = offset + length
        self._batch = batch
        self.dense = dense
        self.family = family
        self.keys_only = keys_only
        # The point-read form (storefile/point.py), built on the first point
        # read of the block and kept with it: views of its buffers, no copies
        # for fixed-width keys.
        self.point = None
        # called with the block when it comes to hold more (its point form):
        # the reader sets it on cached blocks so the cache charges what they hold
        self.on_grow = None

    @property
    def batch(self) -> pa.RecordBatch:
        """The block's cells in cell order (built from a dense block on each call, not kept)."""
        if self._batch is None:
            return self.dense.cells(self.family)
        return self._batch

    @property
    def nbytes(self) -> int:
        """Memory of the decoded block, its arrays' objects included (what the block cache
        charges, with ``point``'s; see :func:`~storage.storefile.cache.arrow_footprint`)."""
        if self.dense is None:
            return arrow_footprint(self._batch.columns)
        return self.dense.footprint()


def decode_body(header: BlockHeader, stored: pa.Buffer, codec: BlockCodec, path: str, offset: int) -> pa.RecordBatch:
    """Verify a block body read at ``offset`` (the header's offset) and decode it."""
    body_offset = offset + BLOCK_HEADER_SIZE
    if stored.size != header.on_disk_size:
        raise CorruptionError(f"truncated data block body ({stored.size} of {header.on_disk_size} bytes)", path, body_offset)
    if checksum(stored) != header.body_checksum:
        raise CorruptionError("data block body checksum mismatch", path, body_offset)
    if header.compression != codec.code:
        raise CorruptionError(
            f"data block compression code {header.compression} differs from the file's ({int(codec.code)})", path, offset
        )
    try:
        body = codec.decompress(stored, header.uncompressed_size)
    except StorageError:
        raise
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise CorruptionError(f"data block body does not decompress ({exc})", path, body_offset) from None
    if body.size != header.uncompressed_size:
        raise CorruptionError("data block body decompressed to the wrong size", path, body_offset)
    try:
        batch = pa.ipc.read_record_batch(body, CELL_SCHEMA)
        batch.validate()
    except (pa.ArrowException, ValueError) as exc:
        raise CorruptionError(f"data block body is not a cell batch ({exc})", path, body_offset) from None
    if batch.num_rows != header.cell_count:
        raise CorruptionError(
            f"data block holds {batch.num_rows} cells, its header says {header.cell_count}", path, offset
        )
    return batch
