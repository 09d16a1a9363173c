"""The block index: first key, offset, length and counts of every data block.

On disk it is one Arrow IPC record batch of :data:`format.INDEX_SCHEMA`
(version 1) or :data:`format.INDEX_SCHEMA_V2` (version 2: also the key
section length, the layout, the row count and the first row start of each
block; no family) inside an index section, one row per block.  In memory it keeps Python
lists for ``bisect``: finding a block is one binary search over sort keys.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np
import pyarrow as pa

from ..errors import CorruptionError
from .format import INDEX_SCHEMA, INDEX_SCHEMA_V2

__all__ = ["BlockIndex", "IndexBuilder"]


class IndexBuilder:
    """Collects one entry per data block as the writer emits them (version 2 index)."""

    def __init__(self) -> None:
        self._schema = INDEX_SCHEMA_V2
        self._cols: list[list] = [[] for _ in self._schema]

    def add(
        self, offset: int, length: int, key_length: int, layout: int, cell_count: int, row_count: int,
        row_start: int, first_cell: tuple,
    ) -> None:
        """Record a version 2 block (see :data:`format.INDEX_SCHEMA_V2`)."""
        row, _family, qualifier, ts, kind = first_cell[:5]
        values = (offset, length, key_length, layout, cell_count, row_count, row_start, row, qualifier, ts, kind)
        for col, value in zip(self._cols, values):
            col.append(value)

    def __len__(self) -> int:
        return len(self._cols[0])

    def encode(self) -> bytes:
        """The index section body."""
        arrays = [pa.array(col, type=field.type) for col, field in zip(self._cols, self._schema)]
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema).serialize().to_pybytes()


class BlockIndex:
    """The decoded, verified index of one file.

    ``key_lengths``, ``layouts``, ``row_counts`` and ``row_starts`` are None
    for a version 1 file (its index does not have them).
    """

    def __init__(
        self,
        offsets: list[int],
        lengths: list[int],
        cell_counts: list[int],
        first_keys: list[tuple],
        key_lengths: list[int] | None = None,
        layouts: list[int] | None = None,
        row_counts: np.ndarray | None = None,
        row_starts: np.ndarray | None = None,
    ):
        self.offsets = offsets
        self.lengths = lengths
        self.cell_counts = cell_counts
        self.first_keys = first_keys  # sort keys: (row, family, qualifier, -timestamp, -type)
        self.key_lengths = key_lengths
        self.layouts = layouts
        self.row_counts = row_counts
        self.row_starts = row_starts
        self.row_start_list = None if row_starts is None else row_starts.tolist()  # for per-block Python checks

    def rows_in_blocks(self, lo: int, hi: int) -> int | None:
        """Distinct rows beginning in blocks ``lo`` to ``hi - 1`` (a row that
        continues from block ``lo - 1`` is not counted); None for a version 1 index."""
        if self.row_counts is None:
            return None
        counts, starts = self.row_counts[lo:hi], self.row_starts[lo:hi]
        return int(counts.sum()) - int(np.count_nonzero(starts))

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
    def decode(
        cls, body, path: str, offset: int, data_end: int, block_count: int, version: int = 1, family: bytes = b""
    ) -> "BlockIndex":
        """Parse an index section body and verify it against the file layout
        (``family``, from the file info, completes version 2 first keys)."""
        schema = INDEX_SCHEMA_V2 if version >= 2 else INDEX_SCHEMA
        try:
            batch = pa.ipc.read_record_batch(pa.py_buffer(bytes(body)), schema)
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
        fams = batch.column("family").to_pylist() if version < 2 else [family] * block_count
        quals = batch.column("qualifier").to_pylist()
        neg_ts = [-t for t in batch.column("timestamp").to_pylist()]  # once per block, at open
        neg_types = [-t for t in batch.column("type").to_pylist()]
        keys = list(zip(rows, fams, quals, neg_ts, neg_types))
        if any(keys[i] >= keys[i + 1] for i in range(len(keys) - 1)):
            raise CorruptionError("block index first keys are not strictly increasing", path, offset)
        if version < 2:
            return cls(offs.tolist(), lens.tolist(), counts.tolist(), keys)
        key_lens = batch.column("key_length").to_numpy()
        layouts = batch.column("layout").to_numpy()
        row_counts = batch.column("row_count").to_numpy()
        row_starts = batch.column("row_start").to_numpy()
        if block_count and (
            (key_lens <= 0).any()
            or (key_lens > lens).any()
            or (layouts > 1).any()
            or (row_counts <= 0).any()
            or (row_counts > counts).any()
            or (row_starts < 0).any()
            or (row_starts > counts).any()
            or row_starts[0] != 0
        ):
            raise CorruptionError("block index sizes or counts are inconsistent", path, offset)
        return cls(
            offs.tolist(), lens.tolist(), counts.tolist(), keys, key_lens.tolist(), layouts.tolist(), row_counts, row_starts
        )
