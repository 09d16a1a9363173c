"""Configuration keys of the input format and the Spark source, and the scan they describe.

A Hadoop job configures HBase's ``TableInputFormat`` with string keys
(``hbase.mapreduce.inputtable``, ``hbase.mapreduce.scan.row.start`` ...);
the hbase-spark connector uses ``hbase.spark.query.*`` names for the same
settings.  Both spellings are accepted here, case-insensitively, and turn
into one :class:`ScanSpec`, the picklable scan every split carries to its
reader: the engine's ``ScanRequest`` and the connector's split-only settings.

Values may be given as strings (as a Hadoop ``Configuration`` holds them)
or as Python values.  Row keys given as strings use HBase's
``Bytes.toBytesBinary`` form: printable characters as themselves, other
bytes as ``\\xNN``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from storage import InvalidArgument, ScanRequest
from storage.engine import check_known_names
from storage.filters import coerce_filter, register_filter_specs
from storage.keys import KeyRange

__all__ = [
    "INPUT_TABLE",
    "ROOT",
    "SCAN_ROW_START",
    "SCAN_ROW_STOP",
    "SCAN_COLUMNS",
    "SCAN_COLUMN_FAMILY",
    "SCAN_TIMESTAMP",
    "SCAN_TIMERANGE_START",
    "SCAN_TIMERANGE_END",
    "SCAN_MAXVERSIONS",
    "SCAN_CACHEBLOCKS",
    "SCAN_CACHE_RESULTS",
    "SCAN_CACHEDROWS",
    "SCAN_CACHING",
    "SCAN_BATCHSIZE",
    "SCAN_FILTER",
    "FILTER_CLASSES",
    "SCAN_INCLUDE_TIMESTAMP",
    "SCAN_KEYS_ONLY",
    "SCAN_RAW",
    "AUTOBALANCE",
    "AVERAGE_REGION_SIZE",
    "SPLITS_PER_REGION",
    "MAX_RESTARTS",
    "PIN_TTL",
    "PIN_REGISTER",
    "PIN_SHARED",
    "SCAN_RUNTIME_FILTER",
    "SPARK_ALIASES",
    "CHECKED_PREFIXES",
    "KNOWN_KEYS",
    "check_keys",
    "ScanSpec",
    "normalize_conf",
    "scan_spec_from_conf",
    "to_bytes_binary",
    "to_string_binary",
    "conf_int",
    "conf_bool",
]

# -- HBase TableInputFormat keys (same names, same meaning) -------------------
INPUT_TABLE = "hbase.mapreduce.inputtable"
SCAN_ROW_START = "hbase.mapreduce.scan.row.start"
SCAN_ROW_STOP = "hbase.mapreduce.scan.row.stop"
SCAN_COLUMNS = "hbase.mapreduce.scan.columns"  # space-separated "cf:q cf2"
SCAN_COLUMN_FAMILY = "hbase.mapreduce.scan.column.family"
SCAN_TIMESTAMP = "hbase.mapreduce.scan.timestamp"  # exactly this timestamp
SCAN_TIMERANGE_START = "hbase.mapreduce.scan.timerange.start"
SCAN_TIMERANGE_END = "hbase.mapreduce.scan.timerange.end"
SCAN_MAXVERSIONS = "hbase.mapreduce.scan.maxversions"
SCAN_CACHEBLOCKS = "hbase.mapreduce.scan.cacheblocks"
SCAN_CACHEDROWS = "hbase.mapreduce.scan.cachedrows"  # rows per batch handed out
SCAN_CACHING = "hbase.mapreduce.scan.caching"  # accepted as cachedrows
SCAN_BATCHSIZE = "hbase.mapreduce.scan.batchsize"  # cells per value (Scan.setBatch)
AUTOBALANCE = "hbase.mapreduce.tif.input.autobalance"
AVERAGE_REGION_SIZE = "hbase.mapreduce.tif.ave.regionsize"
SPLITS_PER_REGION = "hbase.mapreduce.tableinput.mappers.per.region"

# -- regionscan's own keys -----------------------------------------------------
ROOT = "regionscan.root"  # where the tables live: path, pyarrow URI or grpc://host:port
SCAN_FILTER = "regionscan.scan.filter"  # an HBase filter string
FILTER_CLASSES = "regionscan.filter.classes"  # user filters: "NAME=package.module:Class,..."
SCAN_INCLUDE_TIMESTAMP = "regionscan.scan.include.timestamp"  # "cf:q@ts" columns in row batches
SCAN_KEYS_ONLY = "regionscan.scan.keys.only"  # row batches of the key column alone
SCAN_RAW = "regionscan.scan.raw"  # a raw scan (HBase's Scan.setRaw): markers and deleted cells, as cells
# keep the read's results (streamed batches, resolved chunks, decoded WAL) in the block cache for
# the next read of the same unchanged data; cacheblocks is the block side (storage/storefile/cache_memo.py)
SCAN_CACHE_RESULTS = "regionscan.scan.cacheresults"
MAX_RESTARTS = "regionscan.reader.max.restarts"
PIN_TTL = "regionscan.pin.ttl.seconds"
PIN_REGISTER = "regionscan.pin.register"  # false: no pins/<id>.pin file (planning only)
# true: the reads never release their pins (Spark's), so plans of the same files share one
PIN_SHARED = "regionscan.pin.shared"
# false: the JVM source's scan takes no runtime filters from Spark's joins (dynamic pruning);
# read by the JVM scan alone (RegionScanScan.java), named here so the worker accepts it
SCAN_RUNTIME_FILTER = "regionscan.scan.runtimefilter"

SPARK_ALIASES: dict[str, str] = {
    "hbase.spark.query.timerange.start": SCAN_TIMERANGE_START,
    "hbase.spark.query.timerange.end": SCAN_TIMERANGE_END,
    "hbase.spark.query.timestamp": SCAN_TIMESTAMP,
    "hbase.spark.query.maxversions": SCAN_MAXVERSIONS,
    "hbase.spark.query.cachedrows": SCAN_CACHEDROWS,
    "hbase.spark.query.batchsize": SCAN_BATCHSIZE,
    "hbase.spark.query.cacheblocks": SCAN_CACHEBLOCKS,
    "cacheresults": SCAN_CACHE_RESULTS,
    "hbase.spark.query.raw": SCAN_RAW,
    "hbase.table": INPUT_TABLE,
    "hbase.table.name": INPUT_TABLE,  # Hive's HBaseStorageHandler table property
    "table": INPUT_TABLE,
    "minstamp": SCAN_TIMERANGE_START,  # SHC (Spark-HBase connector): Scan.setTimeRange(minStamp, maxStamp)
    "maxstamp": SCAN_TIMERANGE_END,
    "maxversions": SCAN_MAXVERSIONS,  # SHC
    "root": ROOT,
    "filter": SCAN_FILTER,
}
"""hbase-spark (and short Spark option) names -> the key they mean here."""

CHECKED_PREFIXES = ("hbase.mapreduce.", "hbase.spark.", "regionscan.")
"""Keys under these prefixes must be known: a misspelled one is refused, not ignored."""

KNOWN_KEYS: set[str] = {
    INPUT_TABLE, SCAN_ROW_START, SCAN_ROW_STOP, SCAN_COLUMNS, SCAN_COLUMN_FAMILY, SCAN_TIMESTAMP,
    SCAN_TIMERANGE_START, SCAN_TIMERANGE_END, SCAN_MAXVERSIONS, SCAN_CACHEBLOCKS, SCAN_CACHEDROWS,
    SCAN_CACHING, SCAN_BATCHSIZE, AUTOBALANCE, AVERAGE_REGION_SIZE, SPLITS_PER_REGION,
    ROOT, SCAN_FILTER, SCAN_INCLUDE_TIMESTAMP, SCAN_KEYS_ONLY, SCAN_RAW, SCAN_CACHE_RESULTS, MAX_RESTARTS, PIN_TTL,
    PIN_REGISTER, PIN_SHARED, SCAN_RUNTIME_FILTER,
    FILTER_CLASSES, "regionscan.token",
}
"""Every key under :data:`CHECKED_PREFIXES` that the input format reads; modules that read
more keys under these prefixes add them here (the Spark source adds its own)."""

_ESCAPE = re.compile(rb"\\x([0-9a-fA-F]{2})")


def to_bytes_binary(value: Any, what: str = "row key") -> bytes:
    """HBase's ``Bytes.toBytesBinary``: ``"row\\x00\\xff"`` -> ``b"row\\x00\\xff"``; bytes pass through."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be bytes or a string in Bytes.toBytesBinary form, got {value!r}")
    raw = value.encode("utf-8")
    return _ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), raw)


def to_string_binary(value: bytes) -> str:
    """HBase's ``Bytes.toStringBinary``: printable ASCII as is, other bytes as ``\\xNN``."""
    out = []
    for b in value:
        if 32 <= b < 127 and b != 92:
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02X}")
    return "".join(out)


def conf_int(conf: Mapping[str, Any], key: str, default: int | None = None, minimum: int | None = None) -> int | None:
    """An integer setting (a Python int or its decimal string), checked against ``minimum``."""
    value = conf.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise InvalidArgument(f"{key} must be an integer, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{key} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise InvalidArgument(f"{key} must be at least {minimum}, got {value!r}")
    return number


def conf_bool(conf: Mapping[str, Any], key: str, default: bool) -> bool:
    """A boolean setting: a bool, or ``true``/``false`` in any case."""
    value = conf.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise InvalidArgument(f"{key} must be true or false, got {value!r}")


def normalize_conf(conf: Mapping[str, Any] | None) -> dict[str, Any]:
    """Lower-case every key and map hbase-spark / short names onto the keys above.

    When both an alias and the key it means are given with different values,
    the explicit key wins (an alias never silently overrides it).
    """
    out: dict[str, Any] = {}
    aliased: dict[str, Any] = {}
    for key, value in dict(conf or {}).items():
        if not isinstance(key, str):
            raise InvalidArgument(f"configuration keys must be strings, got {key!r}")
        low = key.lower()
        if low in SPARK_ALIASES:
            aliased[SPARK_ALIASES[low]] = value
        else:
            out[low] = value
    for key, value in aliased.items():
        out.setdefault(key, value)
    return out


def check_keys(conf: Mapping[str, Any], extra: frozenset[str] = frozenset(), what: str = "setting",
               prefixes: tuple[str, ...] = CHECKED_PREFIXES) -> None:
    """Refuse (normalized) keys under ``prefixes`` that nothing reads, naming the nearest known key."""
    known = KNOWN_KEYS | set(extra)
    checked = [k for k in conf if k.startswith(prefixes)]
    check_known_names(checked, known | set(SPARK_ALIASES), what)


@dataclass(frozen=True)
class ScanSpec:
    """A split's scan: the engine's :class:`~storage.read.scan_request.ScanRequest`
    and, beside it, what only the connector's splits and readers use; picklable,
    carried by every split.

    ``request`` holds the row bounds (``row_start`` inclusive, ``row_stop``
    exclusive), columns, filter (an HBase filter string), time range, versions,
    ``include_timestamp``, ``raw`` (HBase's raw scan, :mod:`storage.read.raw`:
    every read is of cells, markers included, and ``max_versions`` None reads
    every version), ``cache_results`` and ``batch_size`` (the engine's batch
    size); a split reads forward.  Beside it: ``key_ranges`` (sorted, disjoint
    ``[start, stop)`` ranges, e.g. from filter pushdown) further restrict the rows
    (None restricts nothing, an empty tuple selects no row); ``filter_classes``
    (``NAME=package.module:Class`` entries) are the user filters the filter may
    call, registered in every process that parses it; ``cache_blocks`` keeps the
    blocks read in the process's block cache; ``caching`` caps rows per batch
    handed out and ``batch`` cells per value of the row reader (HBase
    ``Scan.setBatch``); ``keys_only`` row batches carry the ``key`` column alone
    (the scan reads one cell per row and drops its value); ``hidden_columns`` (of
    the request's columns) are read so that their rows exist but left out of the
    row batches (the JVM source's pruned reads; :mod:`storage.read.hidden_columns`;
    a region server root returns them all the same).
    """

    request: ScanRequest = ScanRequest()
    key_ranges: tuple[KeyRange, ...] | None = None
    filter_classes: tuple[str, ...] = ()
    cache_blocks: bool = False
    caching: int | None = None
    batch: int | None = None
    keys_only: bool = False
    hidden_columns: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.request, ScanRequest):
            raise InvalidArgument(f"ScanSpec.request must be a ScanRequest, got {type(self.request).__name__}")
        for name in ("caching", "batch"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise InvalidArgument(f"ScanSpec.{name} must be a positive int or None, got {value!r}")
        if self.request.reverse:
            raise InvalidArgument("a split's scan reads forward: reverse=True is for Table.scan")
        if self.request.filter is not None and not isinstance(self.request.filter, str):
            # a filter string travels with the split and is parsed where it is read
            flt = self.request.filter  # bytes, or a Filter, whose repr is its filter string
            text = flt.decode("utf-8") if isinstance(flt, bytes) else repr(flt)
            object.__setattr__(self, "request", self.request.replace(filter=text))
        if self.request.raw and self.request.output != "cells":
            object.__setattr__(self, "request", self.request.replace(output="cells"))

    def parsed_filter(self):
        """The filter as a Filter (or None), the user filters registered first."""
        register_filter_specs(self.filter_classes)
        return coerce_filter(self.request.filter)

    def with_request(self, **changes: Any) -> "ScanSpec":
        """A copy whose request has ``changes`` (checked again)."""
        return replace(self, request=self.request.replace(**changes))

    def read_request(self, output: str = "rows", span: KeyRange | None = None) -> ScanRequest:
        """The request a reader runs: in ``output`` form (a raw scan reads cells
        whatever is asked), over the key range ``span`` (default: the scan's bounds)."""
        changes: dict[str, Any] = {}
        if not self.request.raw and output != self.request.output:
            changes["output"] = output
        if span is not None:
            changes.update(row_start=span[0] or None, row_stop=span[1], row_prefix=None)
        return self.request.replace(**changes) if changes else self.request

    @property
    def bounds(self) -> KeyRange:
        """The request's row bounds as a key range ``[low, high)``."""
        return self.request.bounds()

    def spans(self) -> list[KeyRange]:
        """The sorted, disjoint row ranges the scan reads: bounds, key ranges and the filter's hints."""
        from storage.keys import intersect, normalize

        spans = [self.bounds]
        if spans[0][1] is not None and spans[0][0] >= spans[0][1]:
            return []
        if self.key_ranges is not None:
            spans = intersect(spans, normalize(self.key_ranges))
        flt = self.parsed_filter()
        if flt is not None:
            hinted = flt.copy()
            hinted.reset()
            ranges = hinted.row_ranges()
            if ranges is not None:
                spans = intersect(spans, normalize(ranges))
        return spans

    def with_ranges(self, key_ranges: Sequence[KeyRange] | None) -> "ScanSpec":
        """A copy restricted to ``key_ranges`` as well."""
        return replace(self, key_ranges=None if key_ranges is None else tuple(key_ranges))


def _columns(conf: Mapping[str, Any]) -> tuple[bytes, ...] | None:
    cols: list[bytes] = []
    value = conf.get(SCAN_COLUMNS)
    if value:
        items = value.split() if isinstance(value, str) else list(value)
        for item in items:
            cols.append(item.encode() if isinstance(item, str) else bytes(item))
    family = conf.get(SCAN_COLUMN_FAMILY)
    if family:
        fam = family.encode() if isinstance(family, str) else bytes(family)
        if fam not in cols:
            cols.append(fam)
    return tuple(cols) or None


def scan_spec_from_conf(conf: Mapping[str, Any]) -> ScanSpec:
    """The :class:`ScanSpec` a (normalized) configuration describes."""
    start = conf.get(SCAN_ROW_START)
    stop = conf.get(SCAN_ROW_STOP)
    time_range = None
    ts = conf_int(conf, SCAN_TIMESTAMP, minimum=0)
    tr_start = conf_int(conf, SCAN_TIMERANGE_START, minimum=0)
    tr_end = conf_int(conf, SCAN_TIMERANGE_END, minimum=0)
    if ts is not None:
        if tr_start is not None or tr_end is not None:
            raise InvalidArgument(f"give {SCAN_TIMESTAMP} or a time range, not both")
        time_range = (ts, ts + 1)  # HBase Scan.setTimestamp: exactly this timestamp
    elif tr_start is not None or tr_end is not None:
        lo = tr_start or 0
        hi = tr_end if tr_end is not None else (1 << 63) - 1
        if hi < lo:
            raise InvalidArgument(f"{SCAN_TIMERANGE_END} ({hi}) is before {SCAN_TIMERANGE_START} ({lo})")
        time_range = (lo, hi)
    classes = conf.get(FILTER_CLASSES)
    if classes is not None and not isinstance(classes, str):
        classes = ",".join(classes)
    filter_classes = tuple(item.strip() for item in (classes or "").split(",") if item.strip())
    register_filter_specs(filter_classes)  # before the filter string that may call them is checked
    flt = conf.get(SCAN_FILTER)
    if flt is not None and not isinstance(flt, str):
        flt = repr(coerce_filter(flt))
    elif flt:
        coerce_filter(flt)  # fail on the driver, with the parser's message
    caching = conf_int(conf, SCAN_CACHEDROWS, minimum=1)
    if caching is None:
        caching = conf_int(conf, SCAN_CACHING, minimum=1)
    raw = conf_bool(conf, SCAN_RAW, False)
    request = ScanRequest(
        row_start=to_bytes_binary(start, SCAN_ROW_START) if start not in (None, "") else None,
        row_stop=to_bytes_binary(stop, SCAN_ROW_STOP) if stop not in (None, "") else None,
        columns=_columns(conf),
        filter=flt or None,
        time_range=time_range,
        max_versions=conf_int(conf, SCAN_MAXVERSIONS, None if raw else 1, minimum=1),  # raw: every version
        include_timestamp=conf_bool(conf, SCAN_INCLUDE_TIMESTAMP, False),
        raw=raw,
        output="cells" if raw else "rows",
        cache_results=conf_bool(conf, SCAN_CACHE_RESULTS, None),
    )
    return ScanSpec(
        request=request,
        cache_blocks=conf_bool(conf, SCAN_CACHEBLOCKS, False),
        caching=caching,
        batch=conf_int(conf, SCAN_BATCHSIZE, minimum=1),
        keys_only=conf_bool(conf, SCAN_KEYS_ONLY, False),
        filter_classes=filter_classes,
    )
