"""The block index: first key, offset, length and cell count of every data block.

On disk it is one Arrow IPC record batch of :data:`format.INDEX_SCHEMA`
(one row per block) inside an index section.  In memory it keeps Python
lists for ``bisect``: finding a block is one binary search over sort keys.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np
import pyarrow as pa

from ..errors import CorruptionError
from .format import INDEX_SCHEMA

__all__ = ["BlockIndex", "IndexBuilder"]


class IndexBuilder:
    """Collects one entry per data block as the writer emits them."""

    def __init__(self) -> None:
        self._cols: list[list] = [[] for _ in INDEX_SCHEMA]

    def add(self, offset: int, length: int, cell_count: int, first_cell: tuple) -> None:
        """Record a block written at ``offset`` whose first cell is ``first_cell``."""
        for col, value in zip(self._cols, (offset, length, cell_count, *first_cell[:5])):
            col.append(value)

    def __len__(self) -> int:
        return len(self._cols[0])

    def encode(self) -> bytes:
        """The index section body."""
        arrays = [pa.array(col, type=field.type) for col, field in zip(self._cols, INDEX_SCHEMA)]
        return pa.RecordBatch.from_arrays(arrays, schema=INDEX_SCHEMA).serialize().to_pybytes()


class BlockIndex:
    """The decoded, verified index of one file."""

    def __init__(self, offsets: list[int], lengths: list[int], cell_counts: list[int], first_keys: list[tuple]):
        self.offsets = offsets
        self.lengths = lengths
        self.cell_counts = cell_counts
        self.first_keys = first_keys  # sort keys: (row, family, qualifier, -timestamp, -type)

    def __len__(self) -> int:
        return len(self.offsets)

    def find_block(self, key: tuple) -> int:
        """The block that may hold the first cell >= ``key``: the last block whose
        first key is <= ``key`` (0 if none; -1 when there are no blocks).

        The writer never splits equal keys across blocks, so no earlier block
        can hold a cell >= ``key``.
        """
        if not self.offsets:
            return -1
        return max(bisect_right(self.first_keys, key) - 1, 0)

    @classmethod
    def decode(cls, body, path: str, offset: int, data_end: int, block_count: int) -> "BlockIndex":
        """Parse an index section body and verify it against the file layout."""
        try:
            batch = pa.ipc.read_record_batch(pa.py_buffer(bytes(body)), INDEX_SCHEMA)
            batch.validate(full=True)
        except (pa.ArrowException, ValueError) as exc:
            raise CorruptionError(f"undecodable block index ({exc})", path, offset) from None
        if batch.num_rows != block_count or any(batch.column(i).null_count for i in range(batch.num_columns)):
            raise CorruptionError(
                f"block index has {batch.num_rows} entries, the trailer says {block_count}", path, offset
            )
        offs = batch.column("offset").to_numpy()
        lens = batch.column("length").to_numpy()
        counts = batch.column("cell_count").to_numpy()
        # Blocks tile [0, data_end) in order and are not empty.
        expected = np.concatenate(([0], np.cumsum(lens)))
        if (
            (block_count and (lens.min() <= 0 or counts.min() <= 0))
            or not np.array_equal(offs, expected[:-1])
            or int(expected[-1]) != data_end
        ):
            raise CorruptionError("block index offsets do not tile the data blocks", path, offset)
        rows = batch.column("row").to_pylist()
        fams = batch.column("family").to_pylist()
        quals = batch.column("qualifier").to_pylist()
        neg_ts = [-t for t in batch.column("timestamp").to_pylist()]  # once per block, at open
        neg_types = [-t for t in batch.column("type").to_pylist()]
        keys = list(zip(rows, fams, quals, neg_ts, neg_types))
        if any(keys[i] >= keys[i + 1] for i in range(len(keys) - 1)):
            raise CorruptionError("block index first keys are not strictly increasing", path, offset)
        return cls(offs.tolist(), lens.tolist(), counts.tolist(), keys)
