"""Filters used by ``regionscan pe``.

:class:`FilterAllFilter` is hbase pe's filter of the same name: it drops
every row inside the scan, so a ``--filterAll`` run measures how fast the
engine reads and rejects rows without the cost of handing them to the
client.  HBase keeps it with its performance tool rather than among the
filters users combine, and so do we.
"""

from __future__ import annotations

import numpy as np

from storage.filters import Filter, FilterList, Keep, Mode

__all__ = ["FilterAllFilter", "with_filter_all"]

_KEEP_MODE = 0  # storage.filters._values.KEEP: values untouched (nothing is kept anyway)


class FilterAllFilter(Filter):
    """Drops every row, by row key, before its cells are looked at."""

    def filter_row_key(self, row: bytes) -> bool:
        return True

    def _skip_rows(self, batch) -> np.ndarray:
        return np.ones(batch.num_rows, dtype=bool)

    # Never reached through the public methods (every row is skipped by key),
    # but a FilterList may ask its children directly.
    def _eval_row(self, cells) -> tuple[Keep, Mode]:
        return False, _KEEP_MODE

    def _eval_batch(self, batch) -> tuple[np.ndarray, int]:
        return np.zeros(batch.num_cells, dtype=bool), _KEEP_MODE

    def __repr__(self) -> str:
        return "FilterAllFilter ()"


def with_filter_all(filter: Filter | str | None) -> Filter:
    """``filter`` AND FilterAllFilter, as hbase pe's ``--filterAll`` builds its FilterList."""
    from storage.filters import coerce_filter

    base = coerce_filter(filter)
    if base is None:
        return FilterAllFilter()
    return FilterList(FilterList.MUST_PASS_ALL, [base, FilterAllFilter()])
