"""The engine's plan of one read on the batch path: what each region runs.

:func:`storage.read.scan_request.plan_batch_scan` makes a :class:`RegionReadPlan`
from a :class:`~storage.read.scan_request.ScanRequest` (the one public description
of a scan); the region runner (:mod:`storage.read.region_runner`) cuts it to each
region's spans and the limit left, and :func:`storage.read.batch_scan.scan_region_batches`
runs it over one region.  It is internal to the engine: callers outside ``storage``
pass a request and spans (``storage.engine``), never a plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..cells import LATEST_TIMESTAMP

__all__ = ["RegionReadPlan"]


@dataclass
class RegionReadPlan:
    """A read as each region runs it (see the module docstring).

    ``low`` is inclusive and
    ``high`` exclusive (None: unbounded), whatever the direction; ``reverse`` only
    changes the order rows come out in.  ``timestamps`` are the ones the request's
    filter selects before versions are counted (a ``TimestampsFilter``), None: any.
    """

    low: bytes = b""
    high: bytes | None = None
    reverse: bool = False
    columns: Sequence[bytes] | None = None  # b"cf:q" or b"cf"
    min_timestamp: int = 0
    max_timestamp: int = LATEST_TIMESTAMP
    timestamps: Sequence[int] | None = None
    # versions per column; None: every version (the family's limit, or for a raw scan all stored)
    max_versions: int | None = 1
    filter: object | None = None  # a storage.filters Filter, already copied and reset
    limit: int | None = None
    batch_size: int = 65536
    output: str = "cells"  # or "rows"
    include_timestamp: bool = False
    # cells output whose dense blocks may come as row batches of each block's own
    # columns (schema ``key`` + ``family:qualifier``): what Table.scan turns into dicts
    row_dicts: bool = False
    # a raw scan (storage/read/raw.py): markers and deleted cells, nothing resolved;
    # max_versions counts puts only (HBase's raw scan), None keeps every version
    raw: bool = False
    # rows output: ``family:qualifier`` specs of ``columns`` whose cells make a row exist
    # but which are left out of the batches (a reader that wants the rows of every mapped
    # column and the values of a few); on dense blocks only their presence is tested
    hidden_columns: Sequence[bytes] = ()
    # keep what this scan builds (streamed batches, resolved chunks) in the block cache for the
    # next scan of the same sources, and serve what an earlier one kept; None: the block
    # cache's default (BlockCache.keeps_results, storage/storefile/cache_memo.py)
    cache_results: bool | None = None
    # a filter that decides no row but lets the engine skip the blocks none of whose rows can
    # pass it (storage/read/block_pruning.py): the reader tests the rows it keeps itself
    prune: object | None = None
    # rows output: dictionary-coded columns may stay codes (ScanRequest.dictionary_values)
    dictionary_values: bool = False
