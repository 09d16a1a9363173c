"""The cell path's scan spec: what the cell-at-a-time scanners read (row range,
direction, columns, time range, versions, filter and the limits that shape
results, as HBase's ``Scan``).

It is built from a :class:`~storage.read.scan_request.ScanRequest` (the one
public description of a scan) for the scanner stack and point reads; the batch
path plans the same request into :class:`~storage.read.region_plan.RegionReadPlan`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from ..cells import LATEST_TIMESTAMP
from ..columns import parse_column
from ..errors import InvalidArgument

__all__ = ["CellScanSpec"]

_FILTER_METHODS = ("copy", "reset", "filter_row_key", "filter_row_cells", "filter_all_remaining")


def _check_int(name: str, value: Any, minimum: int, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidArgument(f"{name}={value!r}: expected an integer >= {minimum}")


@dataclass(frozen=True)
class CellScanSpec:
    """The cell scanners' view of a scan, validated on construction.

    Forward scans return rows in ``[row_start, row_stop)`` (``row_stop``
    ``None`` or ``b""`` = to the end).  Reverse scans follow HBase's reversed
    ``Scan``: ``row_start`` is the highest row returned (inclusive; ``b""``
    = from the last row) and ``row_stop`` the exclusive lower bound.

    ``columns`` selects ``(family, qualifier)`` pairs or whole families
    (``(family, None)``, ``b"family"``), parsed by
    :func:`storage.columns.parse_column`; ``None`` selects everything.  A
    whole family wins over single qualifiers of the same family.
    ``[min_timestamp, max_timestamp)`` is the time range, ``max_versions``
    the versions per column (capped by the family's own setting).
    ``filter`` is a :mod:`storage.filters` filter (a prototype: each region
    scanner works on its own ``copy()``).  ``limit`` caps the rows returned,
    ``batch`` the cells per result (a wider row is returned in chunks, as
    HBase's ``setBatch``), ``max_result_size`` the approximate bytes per
    ``next_rows`` call (the result that crosses it is still returned) and
    ``caching`` the results per ``next_rows`` call by default.
    """

    row_start: bytes = b""
    row_stop: bytes | None = None
    reverse: bool = False
    columns: Sequence[Any] | None = None
    min_timestamp: int = 0
    max_timestamp: int = LATEST_TIMESTAMP
    max_versions: int = 1
    filter: Any = None
    limit: int | None = None
    batch: int | None = None
    max_result_size: int | None = None
    caching: int = 100
    _families: dict | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.row_start, bytes):
            raise InvalidArgument(f"row_start={self.row_start!r}: expected bytes")
        if self.row_stop is not None and not isinstance(self.row_stop, bytes):
            raise InvalidArgument(f"row_stop={self.row_stop!r}: expected bytes or None")
        if self.row_stop == b"":
            object.__setattr__(self, "row_stop", None)
        if not isinstance(self.reverse, bool):
            raise InvalidArgument(f"reverse={self.reverse!r}: expected a bool")
        if self.row_start and self.row_stop is not None:
            if not self.reverse and self.row_start > self.row_stop:
                raise InvalidArgument(
                    f"row_start={self.row_start!r} sorts after row_stop={self.row_stop!r} in a forward scan"
                )
            if self.reverse and self.row_start < self.row_stop:
                raise InvalidArgument(
                    f"row_start={self.row_start!r} sorts before row_stop={self.row_stop!r} in a reverse scan"
                )
        _check_int("min_timestamp", self.min_timestamp, 0)
        _check_int("max_timestamp", self.max_timestamp, 0)
        if self.max_timestamp <= self.min_timestamp:
            raise InvalidArgument(
                f"max_timestamp={self.max_timestamp} must be greater than min_timestamp={self.min_timestamp}"
            )
        _check_int("max_versions", self.max_versions, 1)
        _check_int("limit", self.limit, 1, optional=True)
        _check_int("batch", self.batch, 1, optional=True)
        _check_int("max_result_size", self.max_result_size, 1, optional=True)
        _check_int("caching", self.caching, 1)
        if self.filter is not None:
            missing = [m for m in _FILTER_METHODS if not callable(getattr(self.filter, m, None))]
            if missing:
                raise InvalidArgument(f"filter={self.filter!r}: not a filter, lacks {', '.join(missing)}")
        if self.columns is not None:
            if isinstance(self.columns, (bytes, str)):
                raise InvalidArgument(f"columns={self.columns!r}: expected a list of column specs")
            try:
                parsed = tuple(parse_column(c) for c in self.columns)
            except InvalidArgument as exc:
                raise InvalidArgument(f"columns: {exc}") from None
            families: dict[bytes, frozenset | None] = {}
            for family, qualifier in parsed:
                if qualifier is None:
                    families[family] = None
                elif family not in families:
                    families[family] = frozenset([qualifier])
                elif families[family] is not None:
                    families[family] = families[family] | {qualifier}
            object.__setattr__(self, "columns", parsed)
            object.__setattr__(self, "_families", families)

    def families(self) -> list[bytes] | None:
        """The selected families in sorted order, or ``None`` for all."""
        return None if self._families is None else sorted(self._families)

    def wants_family(self, family: bytes) -> bool:
        """True when the scan reads ``family``."""
        return self._families is None or family in self._families

    def selects(self, family: bytes, qualifier: bytes) -> bool:
        """True when the column ``family:qualifier`` is among the scan's columns."""
        families = self._families
        if families is None:
            return True
        wanted = families.get(family, False)
        return wanted is None or (wanted is not False and qualifier in wanted)

    def with_filter_columns(self) -> "CellScanSpec":
        """The spec to read stores with: the scan's columns plus the ones its
        filter needs to see (``filter.columns_needed()``).  The region
        scanner drops those extra cells again after filtering.  Returns
        ``self`` when nothing is missing."""
        extra = self.filter_only_columns()
        if not extra:
            return self
        return replace(self, columns=tuple(self.columns) + tuple(extra))

    def filter_only_columns(self) -> list[tuple[bytes, bytes | None]]:
        """Columns the filter needs that the scan's columns leave out."""
        if self._families is None or self.filter is None:
            return []
        needed_fn = getattr(self.filter, "columns_needed", None)
        needed = needed_fn() if callable(needed_fn) else None
        out = []
        for spec in needed or ():
            family, qualifier = parse_column(spec)
            if qualifier is None:
                if self._families.get(family, False) is not None:
                    out.append((family, None))
            elif not self.selects(family, qualifier):
                out.append((family, qualifier))
        return out

    def qualifiers(self, family: bytes) -> frozenset[bytes] | None:
        """The qualifiers selected in ``family`` (``None`` = all of them)."""
        if self._families is None:
            return None
        if family not in self._families:
            raise InvalidArgument(f"family={family!r} is not among the scan's columns")
        return self._families[family]
