"""Where a write that creates its table (``newtable`` = N) splits it: at quantiles of the rows' encoded keys.

A table made with N uniform regions cuts the first key byte into N even
parts; the binary SerDe's ordered encoding of every positive BIGINT starts
with 0x80, so such a table takes all its rows into one region.  So, as
Spark's range partitioner does before a sort, the JVM source's driver
samples the DataFrame's key columns before the write: a reservoir of rows
per input partition, each row weighted by its partition's rows per sampled
row (the sample request is :func:`sample_request`).  The worker encodes the
sampled keys with the write's SerDe, exactly as the tasks will encode them,
and cuts the weighted, sorted keys at ``k / N`` (:func:`sample_split_keys`),
so each of the N regions gets about as many rows.  A sample with fewer
distinct keys than N regions need (a tiny DataFrame) keeps the uniform split.

The Python source's driver sees no rows before its tasks run: each task keeps a
:class:`KeySample` of the keys it stages, and the commit cuts the merged samples
(:func:`merged_split_keys`, each task's keys weighted by its rows).
"""

from __future__ import annotations

import base64
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import InvalidArgument

from .options import conf_int
from .raw_read import key_names
from .source_config import SourceConfig

__all__ = ["SAMPLE_PER_REGION", "MAX_SAMPLE", "sample_request", "decode_sample", "sample_split_keys",
           "region_cut_rows", "spark_order_matches", "KeySample", "merged_split_keys"]

SAMPLE_PER_REGION = 1000
"""Sampled keys wanted per region: a region's share of the rows is then known to about 1.5%."""
MAX_SAMPLE = 100_000
"""The most sampled keys wanted, however many regions."""


def sample_request(config: SourceConfig, existing_regions: int | None = None) -> dict | None:
    """What the driver samples before a write that creates ``config``'s table with ``newtable`` = N > 1,
    or that loads into an existing table of ``existing_regions`` > 1 regions (so each region's rows
    go to one task): ``{"columns": the row-key columns, "rows": how many rows in all}``; None when
    there is nothing to split."""
    regions = existing_regions if existing_regions is not None else conf_int(config.conf, "newtable", minimum=1)
    if regions is None or regions < 2:
        return None
    return {"columns": key_names(config), "rows": min(SAMPLE_PER_REGION * regions, MAX_SAMPLE)}


def decode_sample(text: Any, weights: Any) -> tuple[pa.Table, np.ndarray]:
    """The sample a driver sent (base64 of an Arrow IPC stream) and its rows' weights, checked."""
    if not isinstance(text, str) or not isinstance(weights, list):
        raise InvalidArgument("a key sample is base64 Arrow IPC text with a list of weights, one per row")
    table = pa.ipc.open_stream(base64.b64decode(text)).read_all()
    w = np.asarray(weights, dtype=np.float64)
    if len(w) != table.num_rows or (len(w) and (not np.isfinite(w).all() or (w <= 0).any())):
        raise InvalidArgument(f"a key sample of {table.num_rows} rows needs as many positive weights, got {len(w)}")
    return table, w


def sample_split_keys(encoded: pa.Array | pa.ChunkedArray, weights: Sequence[float] | np.ndarray,
                      regions: int) -> tuple[list[bytes], list[int]] | None:
    """The ``regions - 1`` split keys that cut the weighted ``encoded`` row keys into parts of equal
    weight (each cut is a sampled key: the first past the one whose running weight reaches
    ``k / regions``), with the sample row of each; None when the sample holds too few distinct keys
    for that many cuts."""
    if regions < 2 or len(encoded) == 0:
        return None
    keys = pc.cast(encoded, pa.binary())
    order = pc.sort_indices(keys).to_numpy()
    running = np.cumsum(np.asarray(weights, dtype=np.float64)[order])
    targets = running[-1] * np.arange(1, regions) / regions
    rows = order[np.minimum(np.searchsorted(running, targets, side="left") + 1, len(order) - 1)]
    picked = keys.take(pa.array(rows)).to_pylist()
    cuts: list[bytes] = []
    cut_rows: list[int] = []
    for key, row in zip(picked, rows.tolist()):  # at most regions - 1 of them
        if key and (not cuts or key > cuts[-1]):  # the first region starts at b"": an empty cut splits nothing
            cuts.append(key)
            cut_rows.append(row)
    return (cuts, cut_rows) if len(cuts) == regions - 1 else None


def region_cut_rows(encoded: pa.Array | pa.ChunkedArray, region_starts: Sequence[bytes]) -> list[int] | None:
    """For a load into an existing table: per region after the first (``region_starts``, in key
    order), the sampled row with the least encoded key at or past the region's start, so the driver
    can send each region's rows to one task.  A region no sampled key reaches shares the task of the
    region before it.  The cut is a sampled key, not the region's own start (which need not be a
    key the DataFrame's values can express), so the rows between a region's start and its first
    sampled key go with the task before: that region may get a second, small file, whose range
    does not overlap the first (a scan reads both as one sorted run).  None when no cut is left."""
    if len(encoded) == 0:
        return None
    keys = pc.cast(encoded, pa.binary())
    order = pc.sort_indices(keys).to_numpy()
    ordered = keys.take(pa.array(order)).to_numpy(zero_copy_only=False)
    cut_rows: list[int] = []
    last = -1
    for start in region_starts:
        if not start:
            continue  # the first region starts at b""
        at = int(np.searchsorted(ordered, start, side="left"))  # bytes compare as memcmp
        if at < len(order) and at > last:
            cut_rows.append(int(order[at]))
            last = at
    return cut_rows or None


def spark_order_matches(sample: pa.Table, encoded: pa.Array | pa.ChunkedArray) -> bool:
    """Whether the sample's rows, sorted by their key columns' values as Spark sorts them, have
    their encoded keys in order too (an ordered key encoding).  Then the driver can send each
    region's rows to one task by comparing values (the region's key range in Spark's terms)."""
    if sample.num_rows < 2:
        return False
    order = pc.sort_indices(sample, sort_keys=[(name, "ascending") for name in sample.column_names])
    keys = pc.cast(encoded, pa.binary()).take(order)
    n = len(keys)
    return bool(pc.all(pc.less_equal(keys.slice(0, n - 1), keys.slice(1))).as_py())


class KeySample:
    """A uniform sample of up to ``size`` of one write task's encoded row keys (as the task
    stages them): the Python source's tasks sample while they stage, since its driver sees no rows.

    Each key draws a random priority and the ``size`` lowest are kept (a bottom-k sample), so
    every key of the task is equally likely to be in it, whatever the batches' sizes; one NumPy
    selection per batch, no step per key.  ``rows`` counts every key offered.
    """

    def __init__(self, size: int, seed: int | None = None):
        if size < 1:
            raise InvalidArgument(f"a key sample needs a size of at least 1, got {size}")
        self.size = size
        self.rows = 0
        self.keys = pa.array([], pa.binary())
        self._priority = np.empty(0)
        self._rng = np.random.default_rng(seed)

    def add(self, keys: pa.Array | pa.ChunkedArray) -> None:
        """Offer a batch's encoded row keys."""
        n = len(keys)
        if not n:
            return
        self.rows += n
        priority = self._rng.random(n)
        if len(self._priority) >= self.size:  # full: only keys that beat the worst kept one enter
            chosen = np.flatnonzero(priority < self._priority.max())
            if not len(chosen):
                return
            keys, priority = keys.take(pa.array(chosen)), priority[chosen]
        merged = pa.concat_arrays([self.keys, pc.cast(keys, pa.binary()).combine_chunks()
                                   if isinstance(keys, pa.ChunkedArray) else pc.cast(keys, pa.binary())])
        both = np.concatenate([self._priority, priority])
        if len(both) > self.size:
            best = np.argpartition(both, self.size - 1)[: self.size]
            merged, both = merged.take(pa.array(best)), both[best]
        self.keys, self._priority = merged, both


def merged_split_keys(samples: Sequence[tuple[pa.Array, int]], regions: int) -> list[bytes] | None:
    """The ``regions - 1`` split keys of a write whose tasks each sampled their keys: ``samples``
    holds each task's ``(sampled encoded keys, rows the task wrote)``; each sampled key weighs its
    task's rows per sampled key, and :func:`sample_split_keys` cuts the whole at equal weight.
    None when the samples hold too few distinct keys for that many regions."""
    parts = [(keys, rows) for keys, rows in samples if len(keys)]
    if not parts:
        return None
    encoded = pa.concat_arrays([pc.cast(keys, pa.binary()) for keys, _ in parts])
    weights = np.concatenate([np.full(len(keys), rows / len(keys)) for keys, rows in parts])
    found = sample_split_keys(encoded, weights, regions)
    return found[0] if found is not None else None
