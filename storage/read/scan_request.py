"""One scan request for every front end: the embedded and remote tables, the
region server's wire, the connector and the Thrift gateway.

:class:`ScanRequest` holds a scan's arguments in happybase's terms
(``row_start``, ``row_stop``, ``row_prefix``, ``columns``, ``filter``,
``timestamp``, ...), checked once when it is built: every mistake is one
:class:`~storage.errors.InvalidArgument` line naming the argument, raised
before any work starts.  :meth:`ScanRequest.to_wire` / :meth:`ScanRequest.from_wire`
are the ``scan`` object of the server protocol (docs/formats/wire.md), and
:func:`plan_batch_scan` turns a request into the engine's
:class:`~storage.read.region_plan.RegionReadPlan` and the key spans it reads.

Each argument is one field below; its ``metadata`` holds its check (run by
``__post_init__``), its JSON type on the wire (``None``: it shapes results on
the client and never travels) and whether it is sent at its default.
Adding an argument is adding one field (e.g. ``raw: bool = _arg(False,
_as_given, bool, always=False)``): every front end takes it as a keyword
(:mod:`storage.table.scan_api`), clients send it when set and servers accept
it in ``scan`` objects, and :func:`plan_batch_scan` (and
``Table.cell_scanner``) read it from the request.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..cells import LATEST_TIMESTAMP
from ..columns import parse_column
from ..errors import InvalidArgument, check_bytes, clip
from ..filters import coerce_filter
from ..filters.base import Filter, scan_copy
from ..keys import KeyRange, intersect, key_after, prefix_stop
from .region_plan import RegionReadPlan
from .raw import check_raw

__all__ = [
    "ScanRequest",
    "WIRE_OPTIONS",
    "plan_batch_scan",
    "row_range",
    "check_positive",
    "check_wire_type",
    "filter_string",
]


# -- checks, one per kind of argument ------------------------------------------------
def _bytes_or_none(name: str, value: Any) -> bytes | None:
    return None if value is None else check_bytes(value, name)


def check_positive(name: str, value: Any) -> int:
    """``value`` as a positive int (not a bool), or InvalidArgument naming ``name``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgument(f"{name} must be a positive int, got {value!r}")
    return value


def _positive_or_none(name: str, value: Any) -> int | None:
    return None if value is None else check_positive(name, value)


def _columns(name: str, value: Any) -> tuple[bytes, ...] | None:
    if value is None:
        return None
    if isinstance(value, (bytes, str)):
        raise InvalidArgument(f"columns must be a list of b'family:qualifier' or b'family', got {value!r}")
    try:
        items = list(value)
    except TypeError:
        raise InvalidArgument(f"columns must be a list of b'family:qualifier' or b'family', got {clip(repr(value), 80)}") from None
    out = tuple(c.encode() if isinstance(c, str) else check_bytes(c, "column") for c in items)
    for c in out:
        parse_column(c)
    return out


def _filter(name: str, value: Any) -> Filter | str | bytes | None:
    if value is None or isinstance(value, (Filter, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgument(
        f"filter must be a Filter, a filter string or None, got {type(value).__name__} {clip(repr(value), 60)}"
    )


def _timestamp(name: str, value: Any) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                              or not 0 <= value < LATEST_TIMESTAMP):
        raise InvalidArgument(f"timestamp must be an int in [0, 2**63-1), got {value!r}")
    return value


def _time_range(name: str, value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise InvalidArgument(f"time_range must be a (min, max) pair of ints, got {clip(repr(value), 80)}")
    for bound in value:
        if not isinstance(bound, int) or isinstance(bound, bool) or not 0 <= bound <= LATEST_TIMESTAMP:
            raise InvalidArgument(f"time_range bounds must be ints in [0, 2**63-1], got {clip(repr(value), 80)}")
    if value[0] > value[1]:
        raise InvalidArgument(f"time_range min {value[0]} is above its max {value[1]}")
    return tuple(value)


def _max_versions(name: str, value: Any) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise InvalidArgument(f"max_versions must be a positive int, got {value!r}")
    return value


def _limit(name: str, value: Any) -> int | None:
    if value is not None and (not isinstance(value, int) or value < 0):
        raise InvalidArgument(f"limit must be a non-negative int, got {value!r}")
    return value


def _output(name: str, value: Any) -> str:
    if value not in ("rows", "cells"):
        raise InvalidArgument(f"output must be 'rows' or 'cells', got {value!r}")
    return value


def _as_given(name: str, value: Any) -> Any:
    return value


def _bool_value(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be True or False, got {clip(repr(value), 60)}")
    return value


def _bool_or_none(name: str, value: Any) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be True, False or None, got {clip(repr(value), 60)}")
    return value


def _arg(default: Any, check: Callable[[str, Any], Any], wire: type | None, always: bool = True) -> Any:
    """A request field: its default, its check, its JSON type on the wire (None: client-side
    only), and whether it is sent even at its default (the first protocol's fields are; a
    field added later is sent only when set, so a server without it still reads every
    request that does not use it)."""
    return field(default=default, metadata={"check": check, "wire": wire, "always": always})


@dataclass(frozen=True)
class ScanRequest:
    """A checked scan, in the terms of ``Table.scan`` / ``Table.scan_batches``.

    Forward scans read ``[row_start, row_stop)``; reverse scans (HBase's
    reversed ``Scan``) go from ``row_start`` (the highest row, inclusive) down
    to ``row_stop`` (exclusive); ``row_prefix`` replaces both.  ``columns``
    are ``b"cf:q"`` / ``b"cf"`` specs, ``filter`` a Filter or a filter string
    (parsed where the scan runs), ``timestamp`` caps ``time_range``'s max
    (happybase's meaning).  ``max_versions`` is the versions per column
    (:meth:`versions`: 1 when not given; a raw scan then keeps every version,
    and counts puts only when given, see :mod:`storage.read.raw`).  ``output`` and ``batch_size`` (cells per engine
    batch) shape ``scan_batches``; ``scan_batching`` (cells per row piece)
    and ``sorted_columns`` shape the row dicts of ``scan``.  ``cache_results``
    keeps what the scan builds in the block cache, sized and evicted with the
    blocks, for the next scan of the same unchanged data (None: the
    connection's ``cache_results``, off unless set).
    """

    row_start: bytes | None = _arg(None, _bytes_or_none, bytes)
    row_stop: bytes | None = _arg(None, _bytes_or_none, bytes)
    row_prefix: bytes | None = _arg(None, _bytes_or_none, bytes)
    columns: tuple[bytes, ...] | None = _arg(None, _columns, list)
    filter: Filter | str | bytes | None = _arg(None, _filter, str)
    timestamp: int | None = _arg(None, _timestamp, int)
    time_range: tuple[int, int] | None = _arg(None, _time_range, list)
    # None (not given): 1 for a resolved scan, every version for a raw one
    max_versions: int | None = _arg(None, _max_versions, int)
    limit: int | None = _arg(None, _limit, int)
    reverse: bool = _arg(False, _as_given, bool)
    output: str = _arg("rows", _output, str)
    include_timestamp: bool = _arg(False, _as_given, bool)
    batch_size: int = _arg(65536, check_positive, int)
    scan_batching: int | None = _arg(None, _positive_or_none, None)
    sorted_columns: bool = _arg(False, _as_given, None)
    # HBase's raw scan (storage/read/raw.py): markers and every version, nothing resolved
    raw: bool = _arg(False, _as_given, bool, always=False)
    # keep the results this scan builds in the block cache for the next scan of the same
    # unchanged sources, and serve what an earlier scan kept (HBase's cacheBlocks is the
    # block side); None: the connection's default (storage/storefile/cache_memo.py).  Not on
    # the wire: a region server's results are kept by its own connection's setting
    cache_results: bool | None = _arg(None, _bool_or_none, None)
    # a filter deciding no row: blocks whose value bounds show that none of their rows can pass
    # it may be skipped, the other rows come whether they pass it or not (for a reader that
    # tests decoded values itself; storage/read/block_pruning.py).  Not on the wire: a server
    # that reads every block answers the same, only slower
    prune_filter: Filter | str | bytes | None = _arg(None, _filter, None)
    # rows output: a column read from a dictionary chunk may come as a ``pa.DictionaryArray``
    # of binary entries (its codes, not expanded; storage/storefile/dense.py), for a reader
    # that decodes or tests each distinct value once.  Not on the wire: a server sends plain
    # binary columns, which such a reader takes as well
    dictionary_values: bool = _arg(False, _bool_value, None)

    def __post_init__(self) -> None:
        for name, default, check in _CHECKS:
            value = getattr(self, name)
            if value is default:  # every default is valid
                continue
            checked = check(name, value)
            if checked is not value:
                object.__setattr__(self, name, checked)
        row_range(self.row_start, self.row_stop, self.row_prefix, self.reverse)  # combinations
        if self.raw:
            check_raw(self.output)

    @classmethod
    def from_happybase(cls, **kwargs: Any) -> "ScanRequest":
        """The request of ``scan(**kwargs)`` / ``scan_batches(**kwargs)``; an
        unknown keyword is a TypeError naming it, as a call's would be."""
        unknown = sorted(set(kwargs) - _FIELDS)
        if unknown:
            raise TypeError(f"scan() got an unexpected keyword argument {unknown[0]!r}")
        return cls(**kwargs)

    def replace(self, **changes: Any) -> "ScanRequest":
        """A copy with ``changes``, checked again."""
        return dataclasses.replace(self, **changes)

    # -- the engine's terms ------------------------------------------------------------
    def bounds(self) -> KeyRange:
        """``[low, high)`` of the scan, whatever its direction."""
        return row_range(self.row_start, self.row_stop, self.row_prefix, self.reverse)

    def versions(self) -> int | None:
        """The versions per column this scan reads: ``max_versions``, or when not
        given 1 (HBase's default), and for a raw scan None: every stored version."""
        if self.max_versions is not None:
            return self.max_versions
        return None if self.raw else 1

    def time_bounds(self) -> tuple[int, int]:
        """``[min, max)``: ``time_range``, its max capped at ``timestamp``."""
        min_ts, max_ts = self.time_range if self.time_range is not None else (0, LATEST_TIMESTAMP)
        if self.timestamp is not None:
            max_ts = min(max_ts, self.timestamp)
        return min_ts, max_ts

    def scan_filter(self) -> Filter | None:
        """The filter this scan works on: parsed, copied and reset for its direction."""
        flt = coerce_filter(self.filter)
        if flt is None:
            return None
        if flt is self.filter:
            return scan_copy(flt, self.reverse)
        # a string's parse is this call's own copy already (coerce_filter): no second copy
        # (a long IN list's copy costs milliseconds)
        flt.reset()
        return flt.oriented(self.reverse)

    # -- the wire ------------------------------------------------------------------------
    def to_wire(self) -> dict:
        """The protocol's ``scan`` object: every wire option, filters as filter strings."""
        out = {name: getattr(self, name) for name in WIRE_OPTIONS
               if name in _ALWAYS_SENT or getattr(self, name) != _DEFAULTS[name]}
        out["columns"] = None if self.columns is None else list(self.columns)
        out["filter"] = filter_string(self.filter)
        out["time_range"] = None if self.time_range is None else list(self.time_range)
        return out

    @classmethod
    def from_wire(cls, raw: Any, field_error: type[InvalidArgument] = InvalidArgument) -> "ScanRequest":
        """The request a ``scan`` object describes: unknown keys and values of another
        JSON type raise ``field_error``; the values are then checked as any request's."""
        if not isinstance(raw, Mapping):
            raise field_error(f"scan must be an object of scan options, got {type(raw).__name__}")
        unknown = sorted(set(raw) - set(WIRE_OPTIONS))
        if unknown:
            raise field_error(f"unknown scan options {clip(repr(unknown), 120)}; accepted: {', '.join(WIRE_OPTIONS)}")
        kwargs = {k: check_wire_type(k, v, _WIRE_TYPES[k], field_error) for k, v in raw.items() if v is not None}
        tr = kwargs.get("time_range")
        if tr is not None and (len(tr) != 2 or not all(isinstance(t, int) and not isinstance(t, bool) for t in tr)):
            raise field_error(f"time_range must be a [min, max) pair of ints, got {clip(repr(tr), 80)}")
        for column in kwargs.get("columns", ()):
            if not isinstance(column, (bytes, str)):
                raise field_error(f"scan columns must be bytes or strings, got {type(column).__name__}")
        return cls(**kwargs)


_CHECKS = tuple((f.name, f.default, f.metadata["check"]) for f in dataclasses.fields(ScanRequest))
_FIELDS = frozenset(f.name for f in dataclasses.fields(ScanRequest))
_WIRE_TYPES: dict[str, type] = {f.name: f.metadata["wire"] for f in dataclasses.fields(ScanRequest)
                                if f.metadata["wire"] is not None}
_ALWAYS_SENT = frozenset(f.name for f in dataclasses.fields(ScanRequest) if f.metadata["always"])
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ScanRequest)}
WIRE_OPTIONS: tuple[str, ...] = tuple(_WIRE_TYPES)
"""The keys of the protocol's ``scan`` object (the request fields that travel), in order."""


def check_wire_type(name: str, value: Any, kind: type | tuple, error: type[InvalidArgument] = InvalidArgument) -> Any:
    """``value`` of request field ``name`` if it is of exactly ``kind`` (a bool is not an int, nor an int a bool)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        want = " or ".join(k.__name__ for k in kinds)
        raise error(f"request field {name!r} must be {want}, got {type(value).__name__}")
    return value


def filter_string(flt: Any) -> str | None:
    """A filter in the filter language: strings as they are, Filter objects by their repr."""
    if flt is None or isinstance(flt, str):
        return flt
    if isinstance(flt, (bytes, bytearray, memoryview)):
        return bytes(flt).decode("utf-8")
    if isinstance(flt, Filter):
        return repr(flt)  # Filter's repr is its filter-language form
    raise InvalidArgument(f"filter must be a filter string or a storage.filters Filter, got {type(flt).__name__}")


def row_range(
    row_start: bytes | None, row_stop: bytes | None, row_prefix: bytes | None, reverse: bool
) -> KeyRange:
    """Turn happybase/HBase scan bounds into [low, high).

    Forward: row_start inclusive, row_stop exclusive.  Reverse (as HBase's
    reversed Scan): row_start is the highest row, inclusive, and row_stop the
    lower bound, exclusive.
    """
    if row_prefix is not None:
        if row_start is not None or row_stop is not None:
            raise InvalidArgument("row_prefix cannot be combined with row_start or row_stop")
        row_prefix = check_bytes(row_prefix, "row_prefix")
        return row_prefix, prefix_stop(row_prefix)
    if row_start is not None:
        row_start = check_bytes(row_start, "row_start")
    if row_stop is not None:
        row_stop = check_bytes(row_stop, "row_stop")
    if not reverse:
        return row_start or b"", row_stop or None
    low = b"" if not row_stop else key_after(row_stop)
    high = None if not row_start else key_after(row_start)
    return low, high


def _selected(flt: Filter | None) -> list[int] | None:
    """The timestamps ``flt`` selects before versions are counted, sorted (None: any)."""
    stamps = None if flt is None else flt.selected_timestamps()
    return None if stamps is None else sorted(stamps)


def plan_batch_scan(request: ScanRequest, check_family: Callable[[bytes], None] | None = None,
                    output: str | None = None,
                    hidden_columns: Sequence[bytes] = ()) -> tuple[RegionReadPlan, list[KeyRange]]:
    """The engine's batch scan of ``request`` and the key spans it reads: the
    bounds, cut to the ranges the filter allows (a seek to each instead of
    filtering the gaps).  ``check_family`` refuses a column of no family of the
    table; ``output`` overrides the request's (``scan`` reads cells);
    ``hidden_columns`` (of a rows scan's columns) are read so that their rows
    exist but left out of the batches (:mod:`storage.read.hidden_columns`)."""
    low, high = request.bounds()
    if check_family is not None:
        for column in request.columns or ():
            check_family(parse_column(column)[0])
    min_ts, max_ts = request.time_bounds()
    flt = request.scan_filter()
    spans = [(low, high)]
    if flt is not None:
        ranges = flt.row_ranges()
        if ranges is not None:
            spans = intersect([(low, high)], list(ranges))
    scan = RegionReadPlan(
        low=low,
        high=high,
        reverse=request.reverse,
        columns=None if request.columns is None else list(request.columns),
        min_timestamp=min_ts,
        max_timestamp=max_ts,
        max_versions=request.versions(),
        filter=flt,
        # a TimestampsFilter's cells are the versions counted (Filter.selected_timestamps)
        timestamps=_selected(flt),
        limit=request.limit,
        batch_size=request.batch_size,
        output=output or request.output,
        include_timestamp=request.include_timestamp,
        raw=bool(request.raw),
        cache_results=request.cache_results,
        hidden_columns=tuple(hidden_columns),
        prune=coerce_filter(request.prune_filter),
        dictionary_values=request.dictionary_values,
    )
    return scan, spans
