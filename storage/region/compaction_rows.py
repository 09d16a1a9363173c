"""Compaction of dense store files as ROWS: dense blocks in, dense blocks out.

A compaction chunk whose input blocks are all dense (format version 2:
puts only, one version per column) and whose files share no row holds
nothing to resolve: no version to drop, no marker to apply.  A file may
hold markers or versions elsewhere: both belong to their own row, so they
sit in that row's blocks (a row cut across blocks is refused), and those
are in the cell layout.  (TTL is the caller's to rule out.)  Such a chunk
is merged here without ever becoming cells: each file's blocks are laid
out as one row run over the union of their qualifiers (a value and a timestamp column per qualifier, null where a row
lacks it), the runs are interleaved by key
(:func:`storage.kernels.row_merge.merge_row_runs`), and the result goes to
:meth:`storage.storefile.StoreFileWriter.append_rows`, which writes dense
blocks.  Anything else -- a cell-layout block, a row cut across blocks, a
row in two files, qualifiers too many or too sparse for dense blocks --
returns None and the chunk is compacted from cells.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from ..cells import CELL_SCHEMA
from ..kernels.cell_columns import one_array
from ..kernels.row_merge import merge_row_runs, row_order
from .store import StoreFile
from ..storefile.reader_scans import BlockPart
from ..storefile.dense import MAX_DENSE_QUALIFIERS, MAX_FILL

__all__ = ["read_parts", "cell_sources", "chunk_rows", "write_rows"]


def read_parts(files: Sequence[StoreFile], lo: bytes, hi: bytes | None) -> list[list[BlockPart]]:
    """Each file's blocks of rows ``[lo, hi)``, read once (not cached: a
    compaction reads each block once) for either way of compacting them."""
    return [list(f.reader.scan_parts(lo, hi, cache_blocks=False)) for f in files]


def cell_sources(parts: list[list[BlockPart]]) -> list[pa.Table]:
    """The files' blocks as cell tables, for compaction from cells (empty files left out)."""
    return [pa.Table.from_batches([p.batch() for p in file_parts], schema=CELL_SCHEMA) for file_parts in parts if file_parts]


def chunk_rows(parts: list[list[BlockPart]]) -> tuple[list[bytes], pa.Table] | None:
    """The files' rows of one chunk (their :func:`read_parts`) merged into one
    sorted table (``key``, then per qualifier ``"v<j>"`` and ``"t<j>"``) and
    the qualifiers in order, or None when the chunk needs the cell path (see
    the module docstring)."""
    sources: list[list] = []
    for file_parts in parts:
        blocks = []
        for part in file_parts:
            if part.dense is None or part.continued or part.open:
                return None
            blocks.append(part.dense)
        if blocks:
            sources.append(blocks)
    if not sources:
        return None
    qualifiers = sorted({q for blocks in sources for d in blocks for q in d.qualifiers})
    if len(qualifiers) > MAX_DENSE_QUALIFIERS:
        return None
    rows = sum(d.num_rows for blocks in sources for d in blocks)
    cells = sum(d.cell_count() for blocks in sources for d in blocks)
    if rows * len(qualifiers) > MAX_FILL * cells:
        return None  # too sparse for dense blocks: the writer would keep cells
    # the keys alone tell whether a row is in two files (its cells then need
    # resolving): checked before any value column is touched
    order = row_order([b[0].rows if len(b) == 1 else pa.concat_arrays([d.rows for d in b]) for b in sources])
    if order is None:
        return None
    return qualifiers, merge_row_runs([_run(blocks, qualifiers) for blocks in sources], order=order)


def write_rows(writer, qualifiers: list[bytes], rows: pa.Table) -> None:
    """Append the rows :func:`chunk_rows` gave to a version 2 ``writer``."""
    rows = rows.combine_chunks()
    columns = [one_array(c) for c in rows.columns]
    writer.append_rows(
        columns[0], qualifiers, [columns[1 + 2 * j] for j in range(len(qualifiers))],
        [columns[2 + 2 * j] for j in range(len(qualifiers))],
    )


def _run(blocks: list, qualifiers: list[bytes]) -> pa.Table:
    """One file's dense blocks as one row table over ``qualifiers``."""
    parts = []
    for d in blocks:
        n = d.num_rows
        where = {q: j for j, q in enumerate(d.qualifiers)}
        ts = d.plain_timestamps()
        arrays = [d.rows]
        for q in qualifiers:
            j = where.get(q)
            if j is None:
                arrays += [pa.nulls(n, pa.binary()), pa.nulls(n, pa.int64())]
            else:
                arrays += [d.value(j), ts[j]]  # a column left unread fails here, never reads as absent
        parts.append(pa.RecordBatch.from_arrays(arrays, schema=_schema(len(qualifiers))))
    return pa.Table.from_batches(parts)


def _schema(q: int) -> pa.Schema:
    fields = [pa.field("key", pa.binary())]
    for j in range(q):
        fields += [pa.field(f"v{j}", pa.binary()), pa.field(f"t{j}", pa.int64())]
    return pa.schema(fields)
