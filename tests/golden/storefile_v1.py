"""A writer of version 1 store files, kept beside the golden-file generator.

The engine writes format version 2 and reads versions 1 and 2.  Version 1
files now come only from here: the golden files (``make_golden.py v1``) and
the tests that damage a version 1 file on purpose to check the reader.

Version 1 differs from version 2 only in its data blocks and index: a block
is a 40-byte ``BlockHeader`` followed by one Arrow IPC record batch of
``CELL_SCHEMA`` compressed whole, and the index is ``INDEX_SCHEMA`` (offset,
length, cell count and first key of each block); see
``storage/storefile/format.py``.  Everything else (bloom filter, file info,
trailer) is the version 2 writer's.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from storage.errors import InvalidArgument
from storage.storefile import StoreFileWriter
from storage.storefile.format import INDEX_SCHEMA, BlockHeader, checksum

__all__ = ["V1StoreFileWriter"]

_MAX_BODY = (1 << 32) - 1  # a block header's sizes are 4-byte fields


class _V1Index:
    """The version 1 block index: one row of ``INDEX_SCHEMA`` per block."""

    def __init__(self) -> None:
        self._cols: list[list] = [[] for _ in INDEX_SCHEMA]

    def add(self, offset: int, length: int, cell_count: int, first_cell: tuple) -> None:
        for col, value in zip(self._cols, (offset, length, cell_count, *first_cell[:5])):
            col.append(value)

    def __len__(self) -> int:
        return len(self._cols[0])

    def encode(self) -> bytes:
        arrays = [pa.array(col, type=field.type) for col, field in zip(self._cols, INDEX_SCHEMA)]
        return pa.RecordBatch.from_arrays(arrays, schema=INDEX_SCHEMA).serialize().to_pybytes()


class V1StoreFileWriter(StoreFileWriter):
    """:class:`~storage.storefile.StoreFileWriter` writing format version 1 (same contract)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.format_version = 1
        self._index = _V1Index()

    def _write_body(self, block: pa.RecordBatch, offset: int, first: tuple, starts: np.ndarray,
                    continues: bool) -> tuple[int, int]:
        body = block.serialize()
        stored = self._codec.compress(body)
        if body.size > _MAX_BODY or stored.size > _MAX_BODY:
            raise InvalidArgument(f"a data block of {body.size} bytes is too large (cells over 4 GiB?)")
        header = BlockHeader(
            on_disk_size=stored.size,
            uncompressed_size=body.size,
            prev_offset=self._prev_offset,
            cell_count=block.num_rows,
            compression=self._codec.code,
            body_checksum=checksum(stored),
        ).encode()
        self._file.write(header)
        self._file.write(stored)
        self._index.add(offset, len(header) + stored.size, block.num_rows, first)
        return len(header) + stored.size, body.size

    def append_rows(self, *args, **kwargs) -> None:
        """Refused: whole rows are written as dense blocks, which version 1 does not have."""
        raise InvalidArgument("append_rows writes dense blocks, which need format version 2")
