"""What a regionscan read pushes down, and what Spark still evaluates.

:func:`explain` answers for a DataFrame read from the source, or for a set
of options plus Spark filter objects, with a :class:`ScanPlan`::

    df = spark.read.format("regionscan").options(**opts).load().where("k > 5 AND s LIKE '%x'")
    print(connector.explain(df))

    regionscan scan of table t under /data (serde binary)
      columns read: cf:n cf:s
      key ranges: 1 (0 point gets): [b'\\x00\\x00\\x00\\x05\\x00', b'\\x7f\\xff\\xff\\xff\\x00')
      engine filter: none
      pushed (applied exactly): k > 5
      left for Spark: s ENDS WITH 'x'
      ...

Spark's own ``df.explain()`` does not show what a Python data source did
with its filters, so the reader saves each plan summary it makes under the
temporary directory (``regionscan-plans/<options fingerprint>.json``) and
logs it at INFO; ``explain(df)`` plans the query afresh and reads it back.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from storage.engine import redact_uri
from storage.keys import KeyRange

from .options import to_string_binary
from .disjunction import push_tree
from .pushdown import PushdownResult, describe_filter
from .source_config import SourceConfig

__all__ = ["ScanPlan", "explain", "plan_for", "save_plan", "load_plan", "PLAN_DIR", "printable", "ranges_text"]

PLAN_DIR = "regionscan-plans"
_LOG = logging.getLogger("connector.explain")
_SHOWN_RANGES = 8


@dataclass
class ScanPlan:
    """A summary of one read: what the engine does and what Spark still checks."""

    table: str
    root: str
    serde: str
    columns: list[str]
    scan_columns: list[str]
    key_ranges: list[tuple[str, str | None]] | None  # Bytes.toStringBinary form
    point_gets: int
    engine_filter: str | None
    pushed: list[str]
    residual: list[str]
    notes: list[str] = field(default_factory=list)
    splits: int | None = None
    regions: list[str] | None = None
    aggregates: list[str] | None = None  # aggregates answered at planning (JVM source): no task reads rows
    task_aggregates: list[str] | None = None  # aggregates each task computes (JVM source): partial rows to Spark
    decoded: list[str] | None = None  # filters the JVM source's worker evaluates on decoded rows

    @classmethod
    def build(cls, config: SourceConfig, result: PushdownResult, splits: Sequence[Any] | None = None) -> "ScanPlan":
        """The plan of ``config`` with pushdown ``result`` (and its splits, once planned)."""
        fmt = config.input_format(result.key_ranges, repr(result.engine_filter) if result.engine_filter else None)
        spec = fmt.scan_spec()
        return cls(
            table=config.table,
            root=redact_uri(config.root),  # plans are logged and written to disk: no credentials
            serde=config.serde_name,
            columns=config.output_names,
            scan_columns=[c.decode() for c in spec.request.columns or ()],
            key_ranges=ranges_text(result.key_ranges),
            point_gets=result.point_gets,
            engine_filter=spec.request.filter,
            pushed=[describe_filter(f) for f in result.handled],
            residual=[describe_filter(f) for f in result.residual],
            decoded=[describe_filter(f) for f in result.decoded] or None,
            notes=list(result.notes),
            splits=None if splits is None else len(splits),
            regions=None if splits is None else sorted({p.region_id for s in splits for p in s.regions}),
        )

    def to_json(self) -> str:
        """The plan as JSON."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "ScanPlan":
        """A plan from :meth:`to_json`'s output."""
        doc = json.loads(text)
        if doc.get("key_ranges") is not None:
            doc["key_ranges"] = [tuple(r) for r in doc["key_ranges"]]
        return cls(**doc)

    def __str__(self) -> str:
        lines = [f"regionscan scan of table {self.table} under {self.root} (serde {self.serde})"]
        lines.append(f"  columns: {', '.join(self.columns)}")
        lines.append(f"  cells read: {' '.join(self.scan_columns) or 'all families'}")
        if self.key_ranges is None:
            lines.append("  key ranges: whole table")
        else:
            shown = ", ".join(f"[{lo}, {'(open)' if hi is None else hi})" for lo, hi in self.key_ranges[:_SHOWN_RANGES])
            more = f" ... {len(self.key_ranges) - _SHOWN_RANGES} more" if len(self.key_ranges) > _SHOWN_RANGES else ""
            lines.append(f"  key ranges: {len(self.key_ranges)} ({self.point_gets} point gets): {shown}{more}")
        lines.append(f"  engine filter: {printable(self.engine_filter) if self.engine_filter else 'none'}")
        lines.append(f"  pushed (applied exactly): {'; '.join(self.pushed) or 'none'}")
        lines.append(f"  left for Spark: {'; '.join(self.residual) or 'none'}")
        if self.decoded:
            lines.append(f"  evaluated on the decoded rows (engine worker): {'; '.join(self.decoded)}")
        if self.splits is not None:
            lines.append(f"  splits: {self.splits} over regions {', '.join(self.regions or []) or 'none'}")
        if self.aggregates:
            lines.append(f"  aggregates answered at planning (no rows read): {', '.join(self.aggregates)}")
        if self.task_aggregates:
            lines.append(f"  aggregates computed by each task (partial rows to Spark): {', '.join(self.task_aggregates)}")
        for note in self.notes:
            lines.append(f"    - {printable(note)}")
        return "\n".join(lines)


def printable(text: str) -> str:
    """Filter strings carry raw bytes (surrogate-escaped); show those, and controls, as ``\\xNN``."""
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02X}")
        elif code < 32 or code == 127:
            out.append(f"\\x{code:02X}")
        else:
            out.append(ch)
    return "".join(out)


def ranges_text(ranges: list[KeyRange] | None) -> list[tuple[str, str | None]] | None:
    """Key ranges as HBase's ``toStringBinary`` text pairs (None: no key bound)."""
    if ranges is None:
        return None
    return [(to_string_binary(lo), None if hi is None else to_string_binary(hi)) for lo, hi in ranges]


def _plan_path(fingerprint: str) -> str:
    return os.path.join(tempfile.gettempdir(), PLAN_DIR, f"{fingerprint}.json")


_SAVED: dict[str, tuple[ScanPlan, tuple[int, int, int]]] = {}
"""Per plan file, the plan this process wrote there last and that file's identity (inode,
mtime, size): a query planned again with nothing changed finds it still there and writes nothing.
Emptied past :data:`_SAVED_LIMIT` files, so a long-lived worker's many option sets cannot grow it."""
_SAVED_LIMIT = 256


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_ino, st.st_mtime_ns, st.st_size


def save_plan(config: SourceConfig, plan: ScanPlan) -> None:
    """Remember the latest plan of these options (and log it); failures only log.

    The same plan saved again, while the file is still the one this process wrote (any other
    writer replaces it by a new file: another inode), is not written again: a repeated query's
    planning then costs no file write and rename per scan.  A plan is not changed once saved."""
    _LOG.info("%s", plan)
    path = _plan_path(config.fingerprint)
    saved = _SAVED.get(path)
    if saved is not None and saved[0] == plan:
        try:
            if _identity(os.stat(path)) == saved[1]:
                return
        except OSError:
            pass  # gone: written again below
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(plan.to_json())
            f.flush()
            written = _identity(os.fstat(f.fileno()))  # the rename keeps the inode and the mtime
        os.replace(tmp, path)
        if len(_SAVED) >= _SAVED_LIMIT:
            _SAVED.clear()  # forgetting costs one more write of a plan, never a stale one
        _SAVED[path] = (plan, written)
    except OSError as exc:
        _LOG.warning("cannot save the scan plan to %s: %s", path, exc)


def load_plan(config: SourceConfig) -> ScanPlan | None:
    """The latest plan saved for these options, or None."""
    try:
        with open(_plan_path(config.fingerprint), encoding="utf-8") as f:
            return ScanPlan.from_json(f.read())
    except FileNotFoundError:
        return None


def plan_for(options: Mapping[str, Any], filters: Sequence[Any] = (), splits: bool = True) -> ScanPlan:
    """The plan a read with ``options`` makes for Spark ``filters`` (pyspark.sql.datasource objects,
    or :mod:`connector.disjunction` OR/AND trees of them, as the JVM source sends)."""
    config = SourceConfig.from_options(options)
    result = push_tree(list(filters), config.read_serde(), config.column_filters, config.superset_filters)
    planned = None
    if splits:
        fmt = config.input_format(result.key_ranges, repr(result.engine_filter) if result.engine_filter else None)
        fmt.conf["regionscan.pin.register"] = False
        planned = fmt.get_splits()
    return ScanPlan.build(config, result, planned)


def _relation_options(df: Any) -> dict[str, str]:
    plan = df._jdf.queryExecution().analyzed()
    leaves = plan.collectLeaves().iterator()
    while leaves.hasNext():
        leaf = leaves.next()
        try:
            options = dict(leaf.options().asCaseSensitiveMap())
        except Exception:  # a leaf of another kind (py4j raises a generic error): keep looking
            continue
        if leaf.table().getClass().getName() == "regionscan.spark.RegionScanTable":
            # the JVM source reads the DataFrame's columns as its mapping (RegionScanProvider.getTable)
            names = [str(n) for n in leaf.schema().fieldNames()]
            if names and not any("," in n for n in names):
                options = {k: v for k, v in options.items() if k.lower() != "regionscan.columns"}
                options["regionscan.columns"] = ",".join(names)
        return options
    raise ValueError("the DataFrame reads no data source relation")


def explain(source: Any, filters: Sequence[Any] = ()) -> ScanPlan:
    """The :class:`ScanPlan` of a DataFrame read from regionscan, or of options + Spark filters."""
    if isinstance(source, Mapping):
        return plan_for(source, filters)
    config = SourceConfig.from_options(_relation_options(source))
    # a fresh Dataset plans again, so the summary saved now is this query's
    source.select("*")._jdf.queryExecution().executedPlan()
    plan = load_plan(config)
    if plan is None:
        raise ValueError("the reader saved no plan summary (is this DataFrame read with format('regionscan')?)")
    return plan
