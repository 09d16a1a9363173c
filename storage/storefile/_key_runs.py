"""Keys-only reads of version 2 and 3 files: runs of dense blocks decoded together.

A keys-only read (a row count, a ``KeyOnlyFilter`` scan) needs each block's
header and key section, never its values.  Read block by block, every block
costs a fixed amount of Python (header parse, two checksums, an IPC decode,
the block objects); with 1000-byte values a 64 KiB block holds about 60
rows, and that fixed cost bounded a count near 3.5M rows/s.  Here a *run* of
consecutive ``DENSE`` blocks is one unit:

* the run's blocks and their key section lengths come from the block index;
  on a memory-mapped file each key section is a slice of the mapping (value
  pages are never touched), elsewhere one ranged read per block, issued
  concurrently on the reader's prefetch threads;
* all headers of the run are decoded and checked against the index in one
  NumPy pass over a structured array; the header and key section checksums
  are one :func:`storage.checksum.crc32` call per block;
* blocks whose qualifier table is byte for byte the run's first one have
  their IPC record batch messages laid end to end behind the schema message:
  one Arrow IPC stream, decoded by one ``read_all`` (C++ loops over the
  messages);
* the run comes out as one keys-only :class:`DenseBlock` over all its rows.
* a run is read and decoded on one of a few threads kept for that
  (:func:`_decoders`): its many small C heap allocations then come from a
  ``malloc`` arena that the rest of a long-lived process has not fragmented.

A version 3 block's key chunk holds what a version 2 key section does; its
size and checksum are in the block index's chunk directory instead of the
block header, so the checks below take them from there.  A ``KEYS_FIXED`` key
chunk keeps its row keys (all of one width) out of the IPC message: the run's
keys are laid end to end as one binary array with computed offsets, and its
timestamp messages make the stream.

A run never holds a row split between two of its blocks (the index's
``row_start`` says where rows continue), so its rows stay distinct.  When a
vectorized check finds a bad block, that block is decoded alone by the
per-block decoder, which raises its exact error: what counts as corrupt is
defined once, in :mod:`._block_v2` and ``StoreFileReader._header_v2``.

With a block cache and ``cache_blocks``, a decoded run (its row keys and
timestamp columns, never values) is cached as one entry keyed by the file,
the run's first block and its last block; a later read of the same run (a
repeated count) takes it from there.  Without one, every pass reads and
verifies the key sections again (from the OS page cache, for a local file).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..checksum import crc32
from ..errors import CorruptionError, StorageError
from ._block import Block
from ._block_v2 import unpack_section, decode_keys, dense_key_schema, qualifier_table, timestamp_schema
from ._block_v3 import FIXED_KEY_ENCODINGS, check_chunk_count, decode_key_chunk, fixed_key_bytes, fixed_rows
from .dense import DenseBlock
from ._pools import LazyPool, prefetch_pool
from .block_source import BlockSource
from .format import (BLOCK_V2_HEADER_SIZE, BLOCK_V2_MAGIC, BLOCK_V3_HEADER_SIZE, BLOCK_V3_MAGIC, BlockLayout,
                     ChecksumType, ChunkEncoding)

__all__ = ["plan_units", "key_units", "read_run", "RUN_KEY_BYTES"]

RUN_KEY_BYTES = 64 << 20
"""At most this many key section bytes per run (bounds memory and keeps the
run's row key offsets far from Arrow's 2 GiB binary limit)."""

# One version 2 block header as NumPy reads it (``format._BLOCK_V2_HEADER``
# and its checksum, little-endian, no padding).
_HEADER_DTYPE = np.dtype(
    [
        ("magic", "S8"),
        ("layout", "u1"),
        ("checksum_type", "u1"),
        ("compression", "u1"),
        ("reserved", "u1"),
        ("cells", "<u4"),
        ("rows", "<u4"),
        ("prev", "<i8"),
        ("key_size", "<u4"),
        ("key_raw_size", "<u4"),
        ("value_size", "<u4"),
        ("value_raw_size", "<u4"),
        ("key_checksum", "<u4"),
        ("value_checksum", "<u4"),
        ("header_checksum", "<u4"),
    ]
)

_HEADER_V3_DTYPE = np.dtype(
    [
        ("magic", "S8"),
        ("layout", "u1"),
        ("checksum_type", "u1"),
        ("compression", "u1"),
        ("reserved", "u1"),
        ("cells", "<u4"),
        ("rows", "<u4"),
        ("prev", "<i8"),
        ("length", "<u4"),
        ("key_end", "<u4"),
        ("chunk_count", "<u4"),
        ("reserved2", "<u4"),
        ("header_checksum", "<u4"),
    ]
)


def _hsize(source: BlockSource) -> int:
    """The block header size of the source's file (its index has chunk directories from version 3 on)."""
    return BLOCK_V3_HEADER_SIZE if source.index.chunks is not None else BLOCK_V2_HEADER_SIZE


def _key_chunks(source: BlockSource, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(stored sizes, raw sizes, checksums)`` of blocks ``a`` to ``b``'s key chunks (version 3)."""
    chunks = source.index.chunks
    firsts = chunks.starts[a : b + 1]
    return (np.array([chunks.stored[k] for k in firsts], dtype=np.int64),
            np.array([chunks.raw[k] for k in firsts], dtype=np.int64),
            np.array([chunks.checksum[k] for k in firsts], dtype=np.uint32))


_DECODERS = LazyPool(4, "key-run-decode")
_END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"
_WHAT = "data block key section"


def _align8(a: np.ndarray) -> np.ndarray:
    return (a + 7) & ~7


@lru_cache(maxsize=64)
def _stream_head(encodings: tuple, fixed: bool = False) -> bytes:
    """The IPC schema message that turns a dense key section's messages (``fixed``: the
    timestamp messages of ``KEYS_FIXED`` key chunks) into a stream."""
    return (timestamp_schema if fixed else dense_key_schema)(encodings).serialize().to_pybytes()


def plan_units(source: BlockSource, first: int, last: int, max_rows: int) -> list[tuple[int, int]]:
    """Blocks ``first`` to ``last`` (inclusive) cut into units ``(a, b)``
    (inclusive): runs of ``DENSE`` blocks of at most ``max_rows`` rows (at
    least one block) and ``RUN_KEY_BYTES`` key bytes, no row split inside a
    run, and every other block alone.  Planned from the index alone."""
    idx = source.index
    span = slice(first, last + 1)
    dense = np.asarray(idx.layouts[span]) == BlockLayout.DENSE
    continues = idx.row_starts[span] > 0  # the block's first row began in the block before
    cut = ~dense | continues
    cut[1:] |= ~dense[:-1]
    cut[0] = True
    rows = np.cumsum(idx.row_counts[span])
    key_bytes = np.cumsum(np.asarray(idx.key_lengths[span], dtype=np.int64))
    seg = np.flatnonzero(cut).tolist() + [last - first + 1]
    units = []
    for s, e in zip(seg, seg[1:]):
        if not dense[s]:
            units.append((first + s, first + s))
            continue
        while s < e:
            rows_before = int(rows[s - 1]) if s else 0
            bytes_before = int(key_bytes[s - 1]) if s else 0
            k = min(
                int(np.searchsorted(rows, rows_before + max_rows, side="right")),
                int(np.searchsorted(key_bytes, bytes_before + RUN_KEY_BYTES, side="right")),
                e,
            )
            k = max(k, s + 1)
            units.append((first + s, first + k - 1))
            s = k
    return units


def key_units(
    source: BlockSource, first: int, last: int, cache_blocks: bool, max_rows: int
) -> Iterator[tuple[Block, int]]:
    """The keys-only blocks ``first`` to ``last`` as ``(block, last block index)``
    units: a run of dense blocks is one keys-only :class:`Block` spanning
    them (cached as one entry), a ``CELLS`` block is read alone (each through
    the block cache)."""
    idx = source.index
    family = source.family
    cache = source.cache
    for a, b in plan_units(source, first, last, max_rows):
        if idx.layouts[a] != BlockLayout.DENSE:
            yield source.load_keys(a, cache_blocks), a
            continue
        key = (source.file_id, idx.offsets[a], "key run", b)
        units = cache.get(key) if cache is not None else None
        if units is not None:
            source.counters.add("cache_hits")
        else:
            if cache is not None:
                source.counters.add("cache_misses")
            units = []
            for ga, gb, dense in _decoders().submit(read_run, source, a, b).result():
                length = idx.offsets[gb] + idx.lengths[gb] - idx.offsets[ga]
                units.append((Block(ga, idx.offsets[ga], length, None, dense, family, keys_only=True), gb))
            if cache_blocks and cache is not None:
                cache.put(key, units, sum(block.nbytes for block, _ in units))
        yield from units


def _decoders() -> ThreadPoolExecutor:
    """The threads that read and decode key runs (:func:`read_run`).

    Why not the caller's thread: a run's decode makes tens of small C heap
    allocations per block (the C++ objects of Arrow's IPC decode, validation
    and concatenation, NumPy's arrays).  glibc's ``malloc`` serves a thread
    from one arena, and the main thread's arena of a long-lived process is
    fragmented by everything it did before (loads, compactions, scans):
    there the same decode took 1.1x-1.3x the CPU time it takes in a fresh
    process (docs/decisions/2026-12-01-key-runs-on-their-own-threads.md).  These
    threads only ever decode runs, so their arenas stay as compact as a fresh
    process's.  A few threads, so concurrent scans still decode in parallel
    (the IPC decode and the checksums release the GIL).  Forgotten in a
    forked child (:mod:`._pools`)."""
    return _DECODERS.get()


def _sections(source: BlockSource, offsets: list[int], lengths: list[int]) -> list:
    """Header and key section of each block (``lengths`` bytes at ``offsets``)
    as memoryviews: slices of the mapping, or one ranged read per block."""
    mapped = source.mapped()
    if mapped is not None:
        # the index was checked at open to tile the data within the file
        view = memoryview(mapped).cast("B")  # Arrow exports signed bytes ("b"), which compare slowly
        out = [view[o : o + n] for o, n in zip(offsets, lengths)]
        source.counters.add_reads(sum(lengths), len(out), len(out))
        return out
    if source.closed():
        raise StorageError(f"store file reader of {source.where} is closed")

    def read(pair: tuple[int, int]) -> memoryview:
        return memoryview(source.read(pair[0], pair[1], block=True)).cast("B")

    if len(offsets) == 1 or not source.pipelined:
        return [read(pair) for pair in zip(offsets, lengths)]
    return list(prefetch_pool().map(read, zip(offsets, lengths)))


def read_run(source: BlockSource, a: int, b: int) -> list[tuple[int, int, DenseBlock]]:
    """Blocks ``a`` to ``b`` (inclusive, all ``DENSE``, no row split between
    them) read for their keys: ``(first, last, keys-only DenseBlock)`` per
    group of blocks sharing one qualifier table (usually one group)."""
    offsets = source.index.offsets[a : b + 1]
    raws = _sections(source, offsets, source.index.key_lengths[a : b + 1])
    heads = _checked_headers(source, a, b, raws)
    bodies = _key_bodies(source, a, raws, heads)
    hsize = _hsize(source)
    chunks = source.index.chunks
    key_encodings = [chunks.encoding[chunks.starts[i]] for i in range(a, b + 1)] if chunks is not None \
        else [ChunkEncoding.KEYS] * len(bodies)
    # keys of one width (stored whole or delta-coded) are laid end to end, beside the timestamp stream
    fixed = [e in FIXED_KEY_ENCODINGS for e in key_encodings]
    groups = []
    g = 0
    while g < len(bodies):
        qualifiers, encodings, table_size = qualifier_table(bodies[g], source.where, offsets[g] + hsize)
        # blocks of fixed-width keys group by their key width too (its head follows the table)
        prefix = table_size + (8 if fixed[g] else 0)
        table = bytes(bodies[g][:prefix])
        h = g + 1
        while h < len(bodies) and fixed[h] == fixed[g] and bodies[h][:prefix] == table:
            h += 1
        dense = _decode_group(source, a + g, raws[g:h], bodies[g:h], heads[g:h], qualifiers, encodings, table_size,
                              key_encodings[g:h] if fixed[g] else None)
        groups.append((a + g, a + h - 1, dense))
        g = h
    return groups


def _checked_headers(source: BlockSource, a: int, b: int, raws: list) -> np.ndarray:
    """The headers of blocks ``a`` to ``b`` as a structured array, each
    checked (magic, checksums of the header and the key section, fields)
    against itself and the block index in one vectorized pass."""
    idx = source.index
    hsize = _hsize(source)
    v3 = idx.chunks is not None
    dtype = _HEADER_V3_DTYPE if v3 else _HEADER_DTYPE
    offsets = idx.offsets[a : b + 1]
    mapped = source.mapped()
    if mapped is not None:  # one gather from the mapping, no slice per block
        heads = _gather_headers(mapped, np.asarray(offsets, dtype=np.int64), hsize, dtype)
    else:
        heads = np.frombuffer(b"".join([r[:hsize] for r in raws]), dtype=dtype)
    header_crc = np.fromiter((crc32(r[: hsize - 4]) for r in raws), dtype=np.uint32, count=len(raws))
    key_crc = np.fromiter((crc32(r[hsize:]) for r in raws), dtype=np.uint32, count=len(raws))
    prev = np.asarray(idx.offsets[a - 1 : b] if a else [-1] + idx.offsets[:b], dtype=np.int64)
    cells = heads["cells"].astype(np.int64)
    rows = heads["rows"].astype(np.int64)
    key_lengths = np.asarray(idx.key_lengths[a : b + 1], dtype=np.int64)
    lengths = np.asarray(idx.lengths[a : b + 1], dtype=np.int64)
    if v3:
        _stored, _raw, key_crcs = _key_chunks(source, a, b)
        chunk_counts = np.diff(np.asarray(idx.chunks.starts[a : b + 2], dtype=np.int64))
        ok = (
            (heads["magic"] == BLOCK_V3_MAGIC)
            & (heads["reserved2"] == 0)
            & (heads["key_end"] == key_lengths)
            & (heads["length"] == lengths)
            & (heads["chunk_count"] == chunk_counts)
            & (key_crc == key_crcs)
        )
    else:
        key_end = hsize + _align8(heads["key_size"].astype(np.int64))
        ok = (
            (heads["magic"] == BLOCK_V2_MAGIC)
            & (key_end == key_lengths)
            & (key_end + _align8(heads["value_size"].astype(np.int64)) == lengths)
            & (key_crc == heads["key_checksum"])
        )
    ok = (
        ok
        & (header_crc == heads["header_checksum"])
        & (heads["checksum_type"] == ChecksumType.CRC32)
        & (heads["layout"] == BlockLayout.DENSE)
        & (heads["reserved"] == 0)
        & (cells > 0)
        & (rows > 0)
        & (rows <= cells)
        & (heads["prev"] == prev)
        & (cells == np.asarray(idx.cell_counts[a : b + 1], dtype=np.int64))
        & (rows == idx.row_counts[a : b + 1])
        & (heads["compression"] == source.codec.code)
    )
    if not ok.all():
        k = int(np.flatnonzero(~ok)[0])
        _decode_alone(source, a + k, raws[k])
        raise CorruptionError("data block header disagrees with the block index", source.where, offsets[k])
    return heads


def _gather_headers(mapped, starts: np.ndarray, hsize: int = BLOCK_V2_HEADER_SIZE,
                    dtype: np.dtype = _HEADER_DTYPE) -> np.ndarray:
    """The block headers at ``starts`` in the mapped file, copied out as one
    structured array.  Blocks are whole 8-byte words long, so their headers
    usually start on a word: then the gather moves 8-byte words (an index
    array an eighth the size, which matters in a long-lived process whose
    fragmented heap makes every large temporary dearer); else bytes."""
    if hsize % 8 == 0 and not (starts & 7).any():
        words = np.frombuffer(mapped, dtype=np.uint64, count=len(mapped) // 8)
        picked = words[(starts >> 3)[:, None] + np.arange(hsize // 8)]
    else:
        picked = np.frombuffer(mapped, dtype=np.uint8)[starts[:, None] + np.arange(hsize)]
    return picked.view(dtype).ravel()


def _key_bodies(source: BlockSource, a: int, raws: list, heads: np.ndarray) -> list:
    """The (decompressed) key section of each block, checksums already verified."""
    hsize = _hsize(source)
    codec = source.codec
    if source.index.chunks is not None:
        stored, raw, crcs = _key_chunks(source, a, a + len(raws) - 1)
        stored, sizes, crcs = stored.tolist(), raw.tolist(), crcs.tolist()
    else:
        stored, sizes, crcs = (heads["key_size"].tolist(), heads["key_raw_size"].tolist(),
                               heads["key_checksum"].tolist())
    if codec.arrow_name is None:
        bodies = [r[hsize : hsize + n] for r, n in zip(raws, stored)]
    else:
        offsets = source.index.offsets[a : a + len(raws)]
        bodies = [
            memoryview(
                unpack_section(pa.py_buffer(r[hsize:]), k, n, c, codec, _WHAT, source.where, o + hsize)
            ).cast("B")
            for r, k, n, c, o in zip(raws, stored, sizes, crcs, offsets)
        ]
    for k, (body, n) in enumerate(zip(bodies, sizes)):
        if len(body) != n:
            _decode_alone(source, a + k, raws[k])
            raise CorruptionError(f"{_WHAT} has the wrong size", source.where, source.index.offsets[a + k])
    return bodies


def _decode_group(source, first: int, raws, bodies, heads, qualifiers, encodings, table_size,
                  key_encodings: list | None = None) -> DenseBlock:
    """One IPC stream of the blocks' key messages (all behind the same
    qualifier table), checked against their headers.  ``key_encodings``: the blocks'
    ``KEYS_FIXED`` or ``KEYS_DELTA`` key chunks (one key width), whose keys are laid end
    to end beside the stream."""
    counts = heads["rows"].astype(np.int64)
    rows = None
    fixed = key_encodings is not None
    if fixed:
        try:
            layouts = [fixed_key_bytes(body, table_size, n, e, _WHAT, source.where, o)
                       for body, n, e, o in zip(bodies, counts.tolist(), key_encodings,
                                                source.index.offsets[first : first + len(bodies)])]
        except CorruptionError:
            layouts = []  # the block alone, below, raises its exact error
        messages = [body[at:] for body, (_, _, at) in zip(bodies, layouts)]
        if messages:
            rows = fixed_rows(pa.py_buffer(b"".join([keys for _, keys, _ in layouts])), int(counts.sum()),
                              layouts[0][0])
    else:
        messages = [body[table_size:] for body in bodies]
    try:
        stream = b"".join([_stream_head(encodings, fixed), *messages, _END_OF_STREAM])
        table = pa.ipc.open_stream(pa.py_buffer(stream)).read_all() if messages else None
        if table is not None:
            table.validate()
    except (pa.ArrowException, ValueError):
        table = None
    if table is not None:
        chunks = table.column(0).chunks
        lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
        if len(lengths) != len(counts) or not np.array_equal(lengths, counts):
            table = None
    if table is not None:
        columns = [c.chunk(0) for c in table.combine_chunks().columns]
        if rows is not None:
            columns.insert(0, rows)
        dense = DenseBlock(columns[0], qualifiers, columns[1:], None)
        if np.array_equal(_cells_per_block(dense, counts), heads["cells"].astype(np.int64)) and (
            source.index.chunks is None or _key_stats_agree(source, first, dense, counts)
        ):
            return dense
    # something in the group does not decode or disagrees: find the block
    for k, raw in enumerate(raws):
        _decode_alone(source, first + k, raw)
    raise CorruptionError(f"{_WHAT}s do not decode together", source.where, source.index.offsets[first])


def _key_stats_agree(source, first: int, dense: DenseBlock, rows_per_block: np.ndarray) -> bool:
    """Whether each block's first and last row key are those of its key chunk's statistics
    in the block index (version 3), in two vectorized comparisons."""
    chunks = source.index.chunks
    firsts = chunks.starts[first : first + len(rows_per_block)]
    ends = np.cumsum(rows_per_block)
    lows = pa.array([chunks.min[k] for k in firsts], pa.binary())
    highs = pa.array([chunks.max[k] for k in firsts], pa.binary())
    got_lows = dense.rows.take(pa.array(ends - rows_per_block))
    got_highs = dense.rows.take(pa.array(ends - 1))
    return lows.equals(got_lows) and highs.equals(got_highs)


def _cells_per_block(dense: DenseBlock, rows_per_block: np.ndarray) -> np.ndarray:
    """Cells of each block of a run: present timestamps per row, summed per block."""
    total = np.zeros(len(rows_per_block), dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(rows_per_block)[:-1]))
    for j in range(len(dense.qualifiers)):
        has = dense.presence(j)
        if has is None:
            total += rows_per_block
        else:
            total += np.add.reduceat(has.to_numpy(zero_copy_only=False).astype(np.int64), starts)
    return total


def _decode_alone(source, i: int, raw) -> None:
    """Decode block ``i``'s header and key section by the per-block decoder,
    which raises the exact error of a corrupt block."""
    offset = source.index.offsets[i]
    hsize = _hsize(source)
    header = source.header_v2(pa.py_buffer(raw[:hsize]), i)
    if source.index.chunks is not None:
        keys = decode_key_chunk(header, pa.py_buffer(raw), 0, source.index.chunks.entries(i)[0], source.codec,
                                source.where, offset)
        check_chunk_count(header, keys, source.where, offset)
    else:
        decode_keys(header, pa.py_buffer(raw[hsize:]), source.codec, source.where, offset)
