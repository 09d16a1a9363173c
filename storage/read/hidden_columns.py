"""Columns a rows scan reads so that their rows exist, but leaves out of its batches.

A row exists through any of its cells.  A reader that wants every row of a set
of columns but the values of only some (the Spark source: one row per row with a
mapped cell, whichever columns the query decodes) scans them all and hides the
rest (:attr:`storage.read.region_plan.RegionReadPlan.hidden_columns`).  On dense blocks
the hidden columns only lend their presence bitmaps to the row test and are
never sliced; the other paths build them and :func:`without_hidden` drops them
from each batch.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import pyarrow as pa

from ..columns import parse_column

__all__ = ["hidden_names", "without_hidden"]


def hidden_names(specs: Sequence[bytes]) -> frozenset[str]:
    """The row-batch field names of the ``family:qualifier`` specs (values and their ``@ts``)."""
    return _names(tuple(specs))


@lru_cache(maxsize=256)  # asked by every scan and every dense plan
def _names(specs: tuple[bytes, ...]) -> frozenset[str]:
    names = {parse_column(spec).name for spec in specs}
    return frozenset(names | {f"{n}@ts" for n in names})


def without_hidden(batch: pa.RecordBatch, hidden: frozenset[str]) -> pa.RecordBatch:
    """``batch`` without the fields named in ``hidden`` (itself when it has none of them)."""
    keep = [i for i, name in enumerate(batch.schema.names) if name not in hidden]
    return batch if len(keep) == batch.num_columns else batch.select(keep)
