"""The per-region work of a batch scan: which families a scan reads, resolving
their cell sources to the visible versions, and turning resolved cells into the
scan's output batches (filter, projection, limits)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .. import clock, kernels
from ..cells import LATEST_TIMESTAMP
from ..columns import parse_column
from ..kernels.gather import reversed_rows
from ..region.store import StoreView

if TYPE_CHECKING:
    from .region_plan import RegionReadPlan

__all__ = ["BatchProcessor", "family_read"]


def family_read(family: bytes, columns: Sequence[bytes] | None) -> bool:
    """Does a scan of ``columns`` (None: everything) read any of ``family``'s cells?"""
    return not columns or any(parse_column(spec).family == family for spec in columns)


def _column_mask(cells: pa.Table, columns: Sequence[bytes]) -> pa.ChunkedArray | None:
    """Boolean mask of the cells that belong to ``columns``; None selects all."""
    whole = set()
    exact = set()
    for spec in columns:
        family, qualifier = parse_column(spec)
        if qualifier is None:  # b"cf"; b"cf:" is the empty qualifier
            whole.add(family)
        else:
            exact.add(family + b":" + qualifier)
    mask = None
    if whole:
        mask = pc.is_in(cells.column("family"), value_set=pa.array(sorted(whole), pa.binary()))
    if exact:
        joined = pc.binary_join_element_wise(cells.column("family"), cells.column("qualifier"), b":")
        m = pc.is_in(joined, value_set=pa.array(sorted(exact), pa.binary()))
        mask = m if mask is None else pc.or_(mask, m)
    return mask


class BatchProcessor:
    """Runs resolve -> select -> filter -> limit -> output over chunks of one scan."""

    def __init__(self, scan: RegionReadPlan, families: dict[str, StoreView], metrics):
        self.scan = scan
        self.families = families
        self.metrics = metrics
        now = clock.now_ms()  # once per scan, not per cell
        self.ttl_cutoff = {}
        for name, view in families.items():
            ttl = view.settings.ttl
            self.ttl_cutoff[name] = None if ttl is None else now - ttl * 1000
        self.rows_left = scan.limit
        self.select = None
        if scan.columns:
            wanted = list(scan.columns)
            self.select = wanted
            self.select_with_needed = wanted + list(scan.filter.columns_needed() or ()) if scan.filter is not None else wanted
        self.output_columns = list(scan.columns) if scan.columns else [n.encode() for n in families]

    def flushed_cutoff(self, name: str) -> int | None:
        """The TTL cutoff below which a store file's puts past their column's newest
        ``min_versions`` in the file are hidden (HBase's flush would have dropped them:
        :mod:`storage.scanner.flushed`), or None when the family has no TTL or no
        ``min_versions``."""
        return self.ttl_cutoff[name] if self.families[name].settings.min_versions else None

    def trivial_resolution(self, name: str) -> bool:
        """True when resolving one already-clean source changes nothing: no TTL, no
        time range, no timestamp list (the source must also need no resolution)."""
        scan = self.scan
        return (
            self.ttl_cutoff[name] is None
            and scan.min_timestamp == 0
            and scan.max_timestamp == LATEST_TIMESTAMP
            and scan.timestamps is None
        )

    def resolve_sources(self, name: str, sources: list[pa.Table], clean: list[bool]) -> pa.Table:
        """One family's sources of a chunk, merged and resolved.

        Sources that each need no resolution, read without TTL or time
        range, are final as they are: one alone is returned as it is, and
        two that share no row are only merged.
        """
        if all(clean) and self.trivial_resolution(name) and not self.scan.raw:
            if len(sources) == 1:
                return sources[0]
            merged = kernels.merge_disjoint(sources)
            if merged is not None:
                return merged
        return self.resolve_family(name, sources)

    def resolve_family(self, name: str, sources: list[pa.Table]) -> pa.Table:
        view = self.families[name]
        merged = kernels.merge_sources(sources)
        scan = self.scan
        if scan.raw:  # nothing resolved; the scan's max_versions puts per column, uncapped by the family's
            cells = kernels.resolve(merged, min_timestamp=scan.min_timestamp, max_timestamp=scan.max_timestamp,
                                    ttl_cutoff=self.ttl_cutoff[name], timestamps=scan.timestamps,
                                    min_versions=view.settings.min_versions, keep_deletes=True)
            return cells if scan.max_versions is None else kernels.raw_versions(cells, scan.max_versions)
        return kernels.resolve(
            merged,
            max_versions=min(scan.max_versions or view.settings.max_versions, view.settings.max_versions),
            min_timestamp=self.scan.min_timestamp,
            max_timestamp=self.scan.max_timestamp,
            ttl_cutoff=self.ttl_cutoff[name],
            timestamps=self.scan.timestamps,
            min_versions=view.settings.min_versions,
            keep_deleted_cells=view.settings.keep_deleted_cells,
        )

    def finish(self, cells: pa.Table, filtered: bool = False) -> pa.RecordBatch | None:
        """Select, filter, limit and shape one chunk of resolved cells (forward order);
        ``filtered``: the cells are already what the filter leaves of them."""
        scan = self.scan
        if cells.num_rows == 0:
            return None
        if self.metrics is not None:
            self.metrics.add_cells(cells)
        if self.select is not None and (scan.output != "rows" or scan.filter is not None or self.rows_left is not None):
            # rows output without a filter needs no mask: the pivot picks its columns
            mask = _column_mask(cells, self.select_with_needed)
            if mask is not None:
                cells = cells.filter(mask)
        pivot_then_reverse = scan.reverse and scan.output == "rows" and scan.filter is None
        if scan.reverse and not pivot_then_reverse:
            cells = kernels.reverse_rows(cells)
        if scan.filter is not None and not filtered:
            before = _row_count(cells)
            cells = scan.filter.filter_batch(cells)
            if self.metrics is not None:
                self.metrics.rows_filtered += before - _row_count(cells)
            if self.select is not None and self.select_with_needed is not self.select:
                mask = _column_mask(cells, self.select)
                cells = cells.filter(mask)
        if cells.num_rows == 0:
            return None
        if pivot_then_reverse:
            # reversing whole rows after the pivot copies each value once, not twice
            rows = kernels.cells_to_rows(cells, self.output_columns, include_timestamp=scan.include_timestamp)
            rows = reversed_rows(rows)
            if self.rows_left is not None:
                rows = rows.slice(0, min(rows.num_rows, self.rows_left))
                self.rows_left -= rows.num_rows
            return rows
        if self.rows_left is not None:
            starts = kernels.row_boundaries(cells)
            if len(starts) > self.rows_left:
                cells = cells.slice(0, int(starts[self.rows_left]))
                self.rows_left = 0
            else:
                self.rows_left -= len(starts)
        if scan.output == "rows":
            return kernels.cells_to_rows(cells, self.output_columns, include_timestamp=scan.include_timestamp)
        return cells.combine_chunks().to_batches()[0] if cells.num_rows else None

    @property
    def done(self) -> bool:
        return (self.rows_left is not None and self.rows_left <= 0) or (
            self.scan.filter is not None and self.scan.filter.filter_all_remaining()
        )


def _row_count(cells: pa.Table) -> int:
    return len(kernels.row_boundaries(cells)) if cells.num_rows else 0
