"""The block index: first key, offset, length and counts of every data block.

On disk it is one Arrow IPC record batch of :data:`format.INDEX_SCHEMA`
(version 1), :data:`format.INDEX_SCHEMA_V2` (version 2: also the key
section length, the layout, the row count and the first row start of each
block; no family) or :data:`format.INDEX_SCHEMA_V3` (version 3: also the last
row key and each block's chunk directory with the chunks' statistics) inside
an index section, one row per block.  In memory it keeps Python
lists for ``bisect``: finding a block is one binary search over sort keys.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np
import pyarrow as pa

from ..errors import CorruptionError
from ._block_v2 import qualifier_table, unpack_section
from .codecs import BlockCodec
from .format import BLOCK_V3_HEADER_SIZE, INDEX_SCHEMA, INDEX_SCHEMA_V2, INDEX_SCHEMA_V3, ChunkEncoding

__all__ = ["BlockIndex", "IndexBuilder", "ChunkDirectory", "key_chunk_qualifiers"]

_VALUE_ENCODINGS = (ChunkEncoding.IPC, ChunkEncoding.FIXED, ChunkEncoding.DICT, ChunkEncoding.LENGTHS,
                    ChunkEncoding.FRAME)
"""What a version 3 value chunk may be (chunk 0 is KEYS, KEYS_FIXED or KEYS_DELTA)."""


class IndexBuilder:
    """Collects one entry per data block as the writer emits them (version 2 or 3 index)."""

    def __init__(self, version: int = 3) -> None:
        self._schema = INDEX_SCHEMA_V3 if version >= 3 else INDEX_SCHEMA_V2
        self._cols: list[list] = [[] for _ in self._schema]

    def add(
        self, offset: int, length: int, key_length: int, layout: int, cell_count: int, row_count: int,
        row_start: int, first_cell: tuple, encoded=None,
    ) -> None:
        """Record a block (see :data:`format.INDEX_SCHEMA_V2`); a version 3 index also
        takes the encoded block's ``last_row`` and chunk directory (``encoded.chunks``)."""
        row, _family, qualifier, ts, kind = first_cell[:5]
        values = (offset, length, key_length, layout, cell_count, row_count, row_start, row, qualifier, ts, kind)
        if len(self._cols) > len(values):
            values += (encoded.last_row, encoded.chunks)
        for col, value in zip(self._cols, values):
            col.append(value)

    def __len__(self) -> int:
        return len(self._cols[0])

    def encode(self) -> bytes:
        """The index section body."""
        arrays = [pa.array(col, type=field.type) for col, field in zip(self._cols[:11], self._schema)]
        if len(self._cols) > 11:
            arrays.append(pa.array(self._cols[11], pa.binary()))
            arrays.append(_chunk_lists(self._cols[12], self._schema.field("chunks").type))
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema).serialize().to_pybytes()


class BlockIndex:
    """The decoded, verified index of one file.

    ``key_lengths``, ``layouts``, ``row_counts`` and ``row_starts`` are None
    for a version 1 file (its index does not have them).  ``chunks`` (a
    :class:`ChunkDirectory`) is None but for a version 3 file.
    """

    chunks: "ChunkDirectory | None" = None

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
        schema = INDEX_SCHEMA_V3 if version >= 3 else INDEX_SCHEMA_V2 if version >= 2 else INDEX_SCHEMA
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
        index = cls(
            offs.tolist(), lens.tolist(), counts.tolist(), keys, key_lens.tolist(), layouts.tolist(), row_counts, row_starts
        )
        if version >= 3:
            index.chunks = ChunkDirectory.decode(batch, lens, key_lens, layouts, row_counts, counts, rows, path, offset)
        return index


def _chunk_lists(entries: list[list[tuple]], kind: pa.DataType) -> pa.Array:
    """The ``chunks`` column: one list of chunk entries per block, built from flat columns."""
    flat = [e for block in entries for e in block]
    lengths = np.fromiter((len(b) for b in entries), dtype=np.int32, count=len(entries))
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    value_type = kind.value_type
    fields = [value_type.field(i) for i in range(value_type.num_fields)]
    children = [pa.array([e[k] for e in flat], f.type) for k, f in enumerate(fields)]
    structs = pa.StructArray.from_arrays(children, fields=fields)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), structs, type=kind)


class ChunkDirectory:
    """The chunk directories of a version 3 file's blocks, checked at open.

    Flat columns over all blocks' chunks; block ``i``'s chunks are entries
    ``starts[i]`` to ``starts[i + 1] - 1``.  :meth:`entries` gives one block's as
    ``(offset, stored, raw, checksum, encoding, count, min, max)`` tuples
    (offsets from the block's first byte).
    """

    __slots__ = ("starts", "offset", "stored", "raw", "checksum", "encoding", "count", "min", "max", "_rows")

    def __init__(self, starts, offset, stored, raw, checksum, encoding, count, mins, maxs):
        self.starts = starts
        self.offset, self.stored, self.raw, self.checksum = offset, stored, raw, checksum
        self.encoding, self.count, self.min, self.max = encoding, count, mins, maxs
        self._rows: dict = {}

    def entries(self, i: int) -> list[tuple]:
        """Block ``i``'s chunk entries (Python tuples, built once per block and kept)."""
        got = self._rows.get(i)
        if got is None:
            a, b = self.starts[i], self.starts[i + 1]
            got = self._rows[i] = list(zip(self.offset[a:b], self.stored[a:b], self.raw[a:b], self.checksum[a:b],
                                           self.encoding[a:b], self.count[a:b], self.min[a:b], self.max[a:b]))
        return got

    @classmethod
    def decode(cls, batch: pa.RecordBatch, lens, key_lens, layouts, row_counts, cell_counts, first_rows: list,
               path: str, at: int) -> "ChunkDirectory":
        """The directory of an index batch, every entry checked against the layout of its block:
        chunks tile the block from its header on, 8-aligned; the key chunk ends at ``key_length``;
        chunk counts, encodings and statistics agree with the block's layout and counts."""
        lists = batch.column("chunks")
        last_rows = batch.column("last_row").to_pylist()
        starts = lists.offsets.to_numpy().astype(np.int64)
        if lists.offset or starts[0] != 0:
            raise CorruptionError("block index chunk directory is malformed", path, at)
        flat = lists.values.slice(0, int(starts[-1]))
        off = flat.field("offset").to_numpy().astype(np.int64)
        stored = flat.field("stored").to_numpy().astype(np.int64)
        enc = flat.field("encoding").to_numpy()
        count = flat.field("count").to_numpy()
        per_block = np.diff(starts)
        n = len(per_block)
        ok = True
        if n:
            firsts = starts[:-1]
            unknown = np.setdiff1d(enc, list(ChunkEncoding))
            if unknown.size:  # a newer writer's encoding: say so rather than call the file damaged
                known = ", ".join(f"{e.value} {e.name}" for e in ChunkEncoding)
                raise CorruptionError(f"block index names unknown chunk encoding {int(unknown[0])} (this reader knows "
                                      f"{known})", path, at)
            if (per_block < 2).any():
                raise CorruptionError("block index chunk directory disagrees with the blocks", path, at)
            block_of = np.repeat(np.arange(n), per_block)
            ends = off + ((stored + 7) & ~7)
            later = np.ones(len(off), dtype=bool)
            later[firsts] = False  # a value chunk: not the first chunk of its block
            lasts = starts[1:] - 1
            dense = layouts == 1
            keyed = np.where(dense, row_counts, cell_counts)  # what the key chunk counts
            value_block = block_of[later]
            ok = (
                bool((dense | (per_block == 2)).all())
                and bool((off[firsts] == BLOCK_V3_HEADER_SIZE).all())
                and bool((off[later] == ends[np.flatnonzero(later) - 1]).all())
                and bool((ends[lasts] == lens).all())
                and bool((ends[firsts] == key_lens).all())
                and bool(((enc[firsts] == ChunkEncoding.KEYS)
                          | (((enc[firsts] == ChunkEncoding.KEYS_FIXED) | (enc[firsts] == ChunkEncoding.KEYS_DELTA))
                             & dense)).all())
                and bool(np.isin(enc[later], _VALUE_ENCODINGS).all())
                and bool((count[firsts] == keyed).all())
                and bool(((count[later] >= 0) & (count[later] <= keyed[value_block])).all())
                and bool((dense[value_block] | (count[later] == cell_counts[value_block])).all())
            )
            if ok:
                # a dense block's value chunks hold its cells: their counts add up to the cell count
                value_sum = np.bincount(value_block, weights=count[later], minlength=n).astype(np.int64)
                ok = bool(((value_sum == cell_counts) | ~dense).all())
        mins = flat.field("min").to_pylist()
        maxs = flat.field("max").to_pylist()
        if ok and n:
            first_chunks = starts[:-1].tolist()
            ok = (
                all(mins[k] == r for k, r in zip(first_chunks, first_rows))
                and all(maxs[k] == r for k, r in zip(first_chunks, last_rows))
                and all(a <= b for a, b in zip(first_rows, last_rows))
                and all(b <= a for a, b in zip(first_rows[1:], last_rows))
            )
        if not ok:
            raise CorruptionError("block index chunk directory disagrees with the blocks", path, at)
        return cls(starts.tolist(), off.tolist(), stored.tolist(), flat.field("raw").to_numpy().tolist(),
                   flat.field("checksum").to_numpy().tolist(), enc.tolist(), count.tolist(), mins, maxs)


def key_chunk_qualifiers(stored: pa.Buffer, entry: tuple, codec: BlockCodec, path: str, at: int) -> tuple:
    """The qualifiers of a ``DENSE`` block, in value-chunk order: what its chunk directory does
    not record.  ``stored`` is the block's key chunk (``entry``, chunk 0 of the directory) as
    read at file offset ``at``, padded; it is verified against the entry's checksum and sizes
    and decompressed, and only the qualifier table that opens it is parsed (every key chunk
    encoding of a ``DENSE`` block begins with it): no key is rebuilt, no timestamp decoded."""
    body = unpack_section(stored, entry[1], entry[2], entry[3], codec, "data block key chunk", path, at)
    return qualifier_table(body, path, at)[0]
