"""Compaction of dense store files as ROWS: dense blocks in, dense blocks out.

A compaction chunk whose input blocks are all dense (format version 2:
puts only, one version per column) and whose files share no row holds
nothing to resolve: no version to drop, no marker to apply.  A file may
hold markers or versions elsewhere: both belong to their own row, so they
sit in that row's blocks (a row cut across blocks is refused), and those
are in the cell layout.  (TTL is the caller's to rule out.)  Such a chunk is merged here without ever becoming cells: each
file's blocks are laid out as one row run over the union of their
qualifiers (a value and a timestamp column per qualifier, null where a row
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

from .kernels.row_merge import merge_row_runs
from .store import StoreFile
from .storefile._dense import MAX_DENSE_QUALIFIERS, MAX_FILL

__all__ = ["chunk_rows", "write_rows"]


def chunk_rows(files: Sequence[StoreFile], lo: bytes, hi: bytes | None) -> tuple[list[bytes], pa.Table] | None:
    """The rows of ``files`` in ``[lo, hi)`` merged into one sorted table
    (``key``, then per qualifier ``"v<j>"`` and ``"t<j>"``) and the qualifiers
    in order, or None when the chunk needs the cell path (see the module
    docstring).  ``([], empty table)`` when the files hold no row there."""
    sources: list[list] = []
    for f in files:
        if f.reader.format_version < 2:
            return None
        blocks = []
        for part in f.reader.scan_parts(lo, hi, cache_blocks=False):
            if part.dense is None or part.continued or part.open:
                return None
            blocks.append(part.dense)
        if blocks:
            sources.append(blocks)
    qualifiers = sorted({q for blocks in sources for d in blocks for q in d.qualifiers})
    if not sources:
        return [], pa.table({"key": pa.array([], pa.binary())})
    if len(qualifiers) > MAX_DENSE_QUALIFIERS:
        return None
    runs = [_run(blocks, qualifiers) for blocks in sources]
    rows = sum(run.num_rows for run in runs)
    cells = sum(d.cell_count() for blocks in sources for d in blocks)
    if rows * len(qualifiers) > MAX_FILL * cells:
        return None  # too sparse for dense blocks: the writer would keep cells
    merged = merge_row_runs(runs)
    if merged is None:
        return None  # a row in two files: its cells need resolving
    return qualifiers, merged


def write_rows(writer, qualifiers: list[bytes], rows: pa.Table) -> None:
    """Append the rows :func:`chunk_rows` gave to a version 2 ``writer``."""
    if not rows.num_rows:
        return
    rows = rows.combine_chunks()
    columns = [c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in rows.columns]
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
                arrays += [d.values[j], ts[j]]
        parts.append(pa.RecordBatch.from_arrays(arrays, schema=_schema(len(qualifiers))))
    return pa.Table.from_batches(parts)


def _schema(q: int) -> pa.Schema:
    fields = [pa.field("key", pa.binary())]
    for j in range(q):
        fields += [pa.field(f"v{j}", pa.binary()), pa.field(f"t{j}", pa.int64())]
    return pa.schema(fields)
