"""Raw scans (HBase's ``Scan.setRaw(true)``): the stored cells, markers included.

A raw scan resolves nothing: delete markers come back beside the puts they
hide, as :func:`storage.kernels.resolve` gives them with ``keep_deletes=True``.
The time range applies to markers and puts alike, and the TTL drops expired
cells (see there for ``min_versions``).  It runs on the batch path's cell
kernels only (the row path and the cell-at-a-time scanners resolve), locally
or through the region server (the same kernels run there).

Versions (HBase's ``scan 't', {RAW => true, VERSIONS => n}``):

* ``max_versions`` not given (``None``): every stored version of every
  column, the markers among them.  This is what raw scans here have always
  returned, and what HBase's raw-reading tools ask for (RowCounter,
  CellCounter and CopyTable's ``--all.cells`` read all versions, or a
  ``--versions`` given); HBase's own ``Scan`` defaults to one version even
  when raw, so ``max_versions=1`` is a raw ``Scan`` left at HBase's default.
* ``max_versions=n``: as HBase's raw scan (``RawScanQueryMatcher`` over
  ``ScanWildcardColumnTracker``): delete markers do *not* count as versions,
  and a column's cells stop at its ``n + 1``-th put; so the first ``n`` puts
  of each column (row, family, qualifier) are kept, with every marker that
  comes before the ``n + 1``-th put in cell order (a marker sorts before a
  put of its timestamp).  A DeleteFamily marker belongs to the empty
  qualifier's column.  Puts the time range or the TTL drop do not count.
  The family's VERSIONS does not cap ``n`` (HBase takes the scan's versions
  alone when raw).  One kernel over the cell batch:
  :func:`storage.kernels.raw_versions`.

Columns and filters (HBase's ``RawScanQueryMatcher``: time range, then the
column, then the versions, then the filter, for every cell, markers included):

* ``columns`` restrict the cells as in any scan: ``b"cf"`` every cell of the
  family, ``b"cf:q"`` the cells of that column, its Delete and DeleteColumn
  markers among them.  A DeleteFamily marker is a cell of the empty
  qualifier's column (``b"cf:"``), so it comes back with ``b"cf"`` or
  ``b"cf:"`` and not with ``b"cf:q"`` alone, as HBase's explicit column
  tracker gives it.  The version rule above holds for named columns too
  (HBase's explicit tracker, which expects no markers, would count them).
* ``filter`` runs on the cells the versions leave, markers included, as
  HBase hands every cell of a raw scan to ``Filter.filterCell``: a marker's
  value is empty, so ``ValueFilter(=, 'binary:x')`` drops it and
  ``ValueFilter(=, 'binary:')`` keeps it; a row filter keeps or drops whole
  rows, markers and all; ``KeyOnlyFilter`` empties values.  Filters see no
  cell type (HBase's filter language has no test of it).

How the cells come out:

* ``scan_batches(raw=True)``: cell batches (``output="cells"``), whose
  ``type`` column holds each cell's code (4 Put, 8 Delete, 12 DeleteColumn,
  14 DeleteFamily; a DeleteFamily marker has the empty qualifier);
* ``scan(raw=True)``: ``(row, {b"cf:q": [(value, timestamp, type name), ...]})``
  pairs, each column's cells newest first in cell order (a marker sorts
  before a put of the same timestamp), the type names HBase's shell prints
  (``Put``, ``Delete``, ``DeleteColumn``, ``DeleteFamily``), markers with an
  empty value; a DeleteFamily marker is listed under ``b"cf:"``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterator

import numpy as np
import pyarrow as pa

from .. import kernels
from ..cells import CellType
from ..errors import InvalidArgument

__all__ = ["TYPE_NAMES", "check_raw", "raw_dicts"]

TYPE_NAMES = {
    int(CellType.PUT): "Put",
    int(CellType.DELETE): "Delete",
    int(CellType.DELETE_COLUMN): "DeleteColumn",
    int(CellType.DELETE_FAMILY): "DeleteFamily",
}
"""Cell type code -> the name HBase's shell prints for it."""


def check_raw(output: str) -> None:
    """Refuse, in one line, what a raw scan cannot take: rows output (a row
    holds one value per column, not markers and several versions)."""
    if output != "cells":
        raise InvalidArgument("a raw scan returns cells: use output='cells' (a row batch cannot hold markers)")


def raw_dicts(batch: pa.RecordBatch, sorted_columns: bool = False) -> Iterator[tuple[bytes, dict]]:
    """A raw scan's cell batch (whole rows, cell order) as ``(row, {column:
    [(value, timestamp, type name), ...]})`` pairs (see the module docstring)."""
    n = batch.num_rows
    if not n:
        return
    starts = kernels.row_boundaries(batch)
    ends = np.append(starts[1:], n)
    rows = batch.column("row").to_pylist()
    families = batch.column("family").to_pylist()
    qualifiers = batch.column("qualifier").to_pylist()
    stamps = batch.column("timestamp").to_pylist()
    types = batch.column("type").to_pylist()
    values = batch.column("value").to_pylist()
    for lo, hi in zip(starts.tolist(), ends.tolist()):
        out: dict = OrderedDict() if sorted_columns else {}
        for i in range(lo, hi):
            out.setdefault(families[i] + b":" + qualifiers[i], []).append(
                (values[i], stamps[i], TYPE_NAMES.get(types[i], str(types[i]))))
        yield rows[lo], out
