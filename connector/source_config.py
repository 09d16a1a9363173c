"""The Spark source's options, parsed once: table, mapping, SerDe, pruning, scan settings.

Options (case-insensitive; Spark passes strings):

=====================================  ===============================================
``root``                               where the tables live: a path, a pyarrow
                                       filesystem URI, or ``grpc://host:port``
``table`` / ``hbase.table``            the table, ``t`` or ``namespace:t`` (else the
                                       catalog's ``namespace`` and ``name``)
``hbase.columns.mapping``              a mapping in any form the SerDe layer
                                       parses (Hive ``:key,cf:a``, hbase-spark
                                       ``"k STRING :key, a INT cf:a"``, JSON)
``catalog``                            an hbase-spark JSON catalog (with neither,
                                       the table's stored mapping: see
                                       :mod:`connector.stored_mapping`)
``serde``                              SerDe name (default: ``string`` for a Hive
                                       mapping, ``binary`` otherwise)
``columns`` / ``regionscan.columns``   comma-separated columns to read (pruning;
                                       ``columns`` means Hive's column names when
                                       ``columns.types`` is also given)
``hbase.spark.query.*``                timerange.start/end, timestamp, maxVersions,
                                       cachedrows, batchsize, cacheblocks; on a write,
                                       ``timestamp`` is the cells' timestamp; ``raw``:
                                       a DataFrame of raw cells (connector/raw_read.py)
``regionscan.write.timestamp``         the cells' timestamp on a write (wins over
                                       ``hbase.spark.query.timestamp``; default now)
``hbase.spark.use.hbasecontext``       checked as a boolean; either value reads the
                                       same (there is no JVM HBaseContext to reuse)
``newtable``                           on a write: create a missing table with this
                                       many regions
``hbase.spark.pushdown.columnfilter``  ``false`` keeps non-key filters in Spark
``regionscan.pushdown.superset``       ``true`` adds engine filters that only narrow
                                       the scan (``LIKE '%x%'``); Spark re-checks
``regionscan.timestamp.ntz``           ``true`` gives timestamp columns as
                                       ``TIMESTAMP_NTZ``; by default they are
                                       ``TIMESTAMP`` (an instant, as in hbase-spark)
``regionscan.python.pushdown``         ``true`` lets the Python source push filters
                                       (off: unsafe on reused DataFrames/views)
``regionscan.pack.splits``             ``false``: the JVM source runs one task per
                                       split instead of packing them by size
``regionscan.pushdown.aggregates``     ``false``: the JVM source leaves every aggregate
                                       to Spark, which then reads the rows
``regionscan.pushdown.decoded``        ``false``: the JVM source leaves the filters with
                                       no stored-bytes form (``n % 3 = 0``, ``LIKE
                                       '%x%'``) to Spark instead of evaluating them
                                       on the decoded rows in its worker
``filter``                             an HBase filter string applied by the engine
``token``                              region server token (``grpc://`` roots)
=====================================  ===============================================

The other options go to the SerDe as properties (``serde.on.error``,
``serialization.null.format``...) and to the input format
(``hbase.mapreduce.*`` keys).  An option that none of them reads is refused
before the read starts, naming the closest known one (``sede``: did you
mean ``serde``?); Spark's own ``path`` and ``paths`` are let through.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa

from serde import SerDe, create_serde, load_mapping
from serde.mapping.catalog import named_options
from serde.registry import available_serdes, get_serde_class
from serde.mapping import ColumnKind, ColumnMapping
from storage import InvalidArgument
from storage.keys import KeyRange
from storage.engine import FileSystem, canonical_table_name, set_table_values, table_families

from .input_format import REMOTE_TOKEN, TableInputFormat
from .key_widths import KeyCheckedInputFormat, fixed_key_width
from . import stored_mapping
from .stored_mapping import with_stored_mapping
from .options import (
    INPUT_TABLE,
    KNOWN_KEYS,
    PIN_SHARED,
    PIN_TTL,
    ROOT,
    SCAN_COLUMNS,
    SCAN_FILTER,
    SCAN_INCLUDE_TIMESTAMP,
    SCAN_KEYS_ONLY,
    SCAN_RAW,
    SCAN_TIMESTAMP,
    SPARK_ALIASES,
    check_keys,
    conf_bool,
    conf_int,
    normalize_conf,
)

__all__ = ["SourceConfig", "COLUMN_FILTERS", "SUPERSET_FILTERS", "PYTHON_PUSHDOWN", "TIMESTAMP_NTZ", "write_timestamp",
           "store_mapping"]

COLUMN_FILTERS = "hbase.spark.pushdown.columnfilter"
SUPERSET_FILTERS = "regionscan.pushdown.superset"
PYTHON_PUSHDOWN = "regionscan.python.pushdown"
PACK_SPLITS = "regionscan.pack.splits"
AGGREGATE_PUSHDOWN = "regionscan.pushdown.aggregates"
DECODED_FILTERS = "regionscan.pushdown.decoded"
DECODED_MAX_KEPT = "regionscan.pushdown.decoded.maxkept"  # connector/filter_payoff.py
SPARK_PIN_TTL = 6 * 3600
WRITE_TIMESTAMP = "regionscan.write.timestamp"
TIMESTAMP_NTZ = "regionscan.timestamp.ntz"
# hbase-spark reuses a JVM HBaseContext when this is true; every regionscan read opens its
# root itself, so both values mean the same here (the value is still checked as a boolean).
USE_HBASE_CONTEXT = "hbase.spark.use.hbasecontext"
SOURCE_KEYS = frozenset({
    COLUMN_FILTERS, SUPERSET_FILTERS, PYTHON_PUSHDOWN, PACK_SPLITS, AGGREGATE_PUSHDOWN, DECODED_FILTERS,
    DECODED_MAX_KEPT,
    WRITE_TIMESTAMP, TIMESTAMP_NTZ, USE_HBASE_CONTEXT, "regionscan.columns",
    "serde.on.error", "serde.row.dates",  # SerDe properties under the checked prefix "serde."
})
"""The source's own keys under the checked prefixes (beside the input format's)."""
SOURCE_OPTIONS = frozenset({"hbase.columns.mapping", "catalog", "serde", "columns", "columns.types", "token",
                            "newtable"})
"""The source's own options outside those prefixes (the table above)."""
SPARK_OPTIONS = frozenset({"path", "paths"})
"""Options Spark itself gives a source (``load(path)``); nothing here reads them."""


def _static_names() -> frozenset[str]:
    """The option names known whatever the mapping and SerDe (KNOWN_KEYS grows as modules load)."""
    return SOURCE_KEYS | SOURCE_OPTIONS | SPARK_OPTIONS | frozenset(KNOWN_KEYS) | frozenset(SPARK_ALIASES)


def _builtin_properties() -> frozenset[str]:
    """The property names the built-in SerDes declare (before a mapping is known)."""
    names: set[str] = set()
    for name in available_serdes():
        try:
            names |= get_serde_class(name).declared_properties()
        except InvalidArgument:  # a SerDe whose optional package is missing reads nothing here
            continue
    return frozenset(names)


def write_timestamp(conf: Mapping[str, Any]) -> int:
    """The timestamp a write gives its cells: ``regionscan.write.timestamp``, else hbase-spark's
    ``hbase.spark.query.timestamp`` (which hbase-spark's writer also uses for its puts), else now."""
    explicit = conf_int(conf, WRITE_TIMESTAMP, minimum=0)
    if explicit is not None:
        return explicit
    return conf_int(conf, SCAN_TIMESTAMP, int(time.time() * 1000), minimum=0)


_serde_cache: dict[str, SerDe] = {}
_serde_lock = threading.Lock()


@functools.lru_cache(maxsize=256)
def _mapping_of(options: tuple[tuple[str, str], ...]) -> ColumnMapping:
    """The column mapping of ``options``, kept: a JSON catalog took about 1 ms to parse, and one
    scan's planning asked for it ten times (the table name, the SerDe, the schema...).  A
    :class:`ColumnMapping` is immutable, and a mapping that fails to parse is not kept."""
    config = SourceConfig(options)
    return load_mapping(config.mapping_text, config._properties())


@dataclass(frozen=True)
class SourceConfig:
    """Everything a reader or writer needs from the options; picklable, cheap to ship to tasks."""

    options: tuple[tuple[str, str], ...]  # normalized (lower-case keys), sorted

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "SourceConfig":
        """Parse and check Spark options (any case; values made strings)."""
        given = normalize_conf({str(k): v for k, v in dict(options).items()})
        try:
            conf = with_stored_mapping(given)  # no mapping given: the table's stored one (connector/stored_mapping.py)
        except InvalidArgument:
            # a misspelled mapping option is the likely reason no mapping was found: name it first
            check_keys(given, _static_names() | _builtin_properties(), "option", ("",))
            raise
        config = cls(tuple(sorted((k, v if isinstance(v, str) else json.dumps(v) if isinstance(v, (dict, list)) else str(v))
                                  for k, v in conf.items())))
        config.validate(stored=frozenset(conf) - frozenset(given))
        return config

    @property
    def conf(self) -> dict[str, str]:
        """The options as a dict (lower-case keys)."""
        return dict(self.options)

    @property
    def fingerprint(self) -> str:
        """A stable id of these options (names the saved plan summary)."""
        return hashlib.sha1(json.dumps(self.options).encode()).hexdigest()[:16]

    # -- what to read -----------------------------------------------------------
    @property
    def root(self) -> str:
        """Where the tables live."""
        return self.conf.get(ROOT) or ""

    @property
    def mapping_text(self) -> str:
        """The mapping as given (``catalog`` or ``hbase.columns.mapping``)."""
        conf = self.conf
        return conf.get("catalog") or conf.get("hbase.columns.mapping") or ""

    def mapping(self) -> ColumnMapping:
        """The full column mapping (parsed once per distinct options: see :func:`_mapping_of`)."""
        return _mapping_of(self.options)

    @property
    def table(self) -> str:
        """The table: the ``table`` option, else the catalog's table name."""
        name = self.conf.get(INPUT_TABLE)
        if name:
            return canonical_table_name(name)
        mapping = self.mapping()
        if mapping.table:
            # hbase-spark's catalog names the table as {"namespace": ns, "name": t}
            if mapping.namespace and ":" not in mapping.table:
                return canonical_table_name(f"{mapping.namespace}:{mapping.table}")
            return canonical_table_name(mapping.table)
        raise InvalidArgument("the table is not set: give option 'table' (or hbase.table, or the catalog's table name)")

    @property
    def serde_name(self) -> str:
        """The SerDe: the ``serde`` option, else ``string`` for Hive mappings and ``binary`` otherwise."""
        name = self.conf.get("serde")
        if name:
            return name
        return "string" if self.mapping().source == "hive" else "binary"

    def _properties(self) -> dict[str, str]:
        return dict(self.conf)

    @property
    def selected(self) -> tuple[str, ...] | None:
        """The columns to read (pruning), or None for all (and for a raw read, whose
        columns are cells': :func:`connector.raw_read.output_names`)."""
        names = self.column_option()
        if names is None or conf_bool(self.conf, SCAN_RAW, False):
            return None
        mapping = self.mapping()
        by_lower = {c.name.lower(): c.name for c in mapping.columns}
        out = []
        for n in names:
            if n.lower() not in by_lower:
                raise InvalidArgument(f"column {n!r} in the columns option is not in the mapping ({mapping.names})")
            out.append(by_lower[n.lower()])
        return tuple(out)

    def column_option(self) -> tuple[str, ...] | None:
        """The names the ``columns`` / ``regionscan.columns`` option lists, as given (None: not set)."""
        conf = self.conf
        text = conf.get("regionscan.columns")
        if text is None and "columns.types" not in conf:
            text = conf.get("columns")
        if not text:
            return None
        return tuple(n.strip() for n in text.split(",") if n.strip())

    def with_columns(self, names: list[str]) -> "SourceConfig":
        """The same read restricted to ``names`` (pruning)."""
        conf = self.conf
        conf["regionscan.columns"] = ",".join(names)
        return SourceConfig(tuple(sorted(conf.items())))

    @property
    def column_filters(self) -> bool:
        """False when ``hbase.spark.pushdown.columnfilter`` keeps non-key filters in Spark."""
        return conf_bool(self.conf, COLUMN_FILTERS, True)

    @property
    def python_pushdown(self) -> bool:
        """True when ``regionscan.python.pushdown`` opts the Python source into filter pushdown.

        Off by default: Spark 4.3 keeps a Python reader's last pushdown on
        the relation, so a reused DataFrame or view would answer a later
        query with an earlier query's filters (see docs/connector.md).
        """
        return conf_bool(self.conf, PYTHON_PUSHDOWN, False)

    @property
    def superset_filters(self) -> bool:
        """True when ``regionscan.pushdown.superset`` asks for narrowing-only engine filters."""
        return conf_bool(self.conf, SUPERSET_FILTERS, False)

    def validate(self, stored: frozenset[str] = frozenset()) -> None:
        """Fail early (on the driver) on a missing root, mapping or table, an option nothing reads,
        or a bad mapping; ``stored`` are the keys that came from the table's stored mapping."""
        if not self.root:
            raise InvalidArgument("option 'root' (where the tables live: a path, a URI or grpc://host:port) is not set")
        conf = self.conf
        static = _static_names()
        if any(k not in static for k in conf):  # first: a misspelled option may be why what follows fails
            known = static | self._serde_property_names()
            check_keys({k: v for k, v in conf.items() if k not in stored}, known, "option", ("",))
            # stored before these checks were made: say where it comes from
            check_keys({k: v for k, v in conf.items() if k in stored}, known, "option of the table's stored mapping",
                       ("",))
        if not self.mapping_text:
            raise InvalidArgument("give the column mapping: option 'hbase.columns.mapping' or 'catalog'")
        conf_bool(conf, USE_HBASE_CONTEXT, True)
        self.table  # noqa: B018 - raises when missing
        self.read_serde()

    def _serde_property_names(self) -> frozenset[str]:
        """The (lower-case) property names the SerDe reads with this mapping; where the SerDe does
        not build, what its class declares and the options its catalog names."""
        try:
            names = self.read_serde().property_names()
        except InvalidArgument:  # a bad mapping is reported after the names are checked
            names = set(SerDe.common_properties)
            try:
                names |= get_serde_class(self.conf.get("serde") or "binary").declared_properties()
            except InvalidArgument:
                pass
            if self.conf.get("catalog"):
                names |= named_options(self.conf["catalog"])
        return frozenset(n.lower() for n in names)

    # -- SerDes -----------------------------------------------------------------
    def _cached(self, kind: str, build) -> SerDe:
        key = f"{kind}:{self.fingerprint}"
        with _serde_lock:
            serde = _serde_cache.get(key)
            if serde is None:
                serde = build()
                _serde_cache[key] = serde
            return serde

    def write_serde(self) -> SerDe:
        """The SerDe of the whole mapping (what the writer encodes)."""
        return self._cached("write", lambda: create_serde(self.serde_name, self.mapping(), self._properties()))

    def read_serde(self) -> SerDe:
        """The SerDe of the pruned mapping: the selected columns plus the row key."""

        def build() -> SerDe:
            mapping = self.mapping()
            selected = self.selected
            if selected is not None:
                keep = set(selected)
                cols = tuple(
                    c for c in mapping.columns
                    if c.name in keep or c.kind in (ColumnKind.KEY, ColumnKind.KEY_PART)
                )
                mapping = ColumnMapping(cols, mapping.rowkey, mapping.default_storage, mapping.namespace,
                                        mapping.table, mapping.source)
            return create_serde(self.serde_name, mapping, self._properties())

        return self._cached("read", build)

    @property
    def output_names(self) -> list[str]:
        """The DataFrame's columns in order."""
        selected = self.selected
        names = self.read_serde().column_names
        if selected is None:
            return names
        keep = set(selected)
        return [n for n in names if n in keep]

    @property
    def timestamp_ntz(self) -> bool:
        """True when ``regionscan.timestamp.ntz`` asks for TIMESTAMP_NTZ columns (default TIMESTAMP)."""
        return conf_bool(self.conf, TIMESTAMP_NTZ, False)

    def schema_ddl(self) -> str:
        """The DataFrame schema as a Spark DDL string."""
        serde = self.read_serde()
        ntz = self.timestamp_ntz
        return ", ".join(
            "`" + name.replace("`", "``") + "` " + serde.column_type(name).ddl(ntz) for name in self.output_names
        )

    def spark_arrow_schema(self, names: list[str]) -> pa.Schema:
        """The Arrow schema Spark expects for ``names`` (zoned timestamps unless NTZ)."""
        serde = self.read_serde()
        ntz = self.timestamp_ntz
        return pa.schema([pa.field(n, serde.column_type(n).spark_arrow(ntz)) for n in names])

    # -- scanning ---------------------------------------------------------------
    def input_format(self, key_ranges: list[KeyRange] | None = None, engine_filter: str | None = None) -> TableInputFormat:
        """The input format of this read, restricted by pushed key ranges and engine filter."""
        conf: dict[str, Any] = {k: v for k, v in self.conf.items() if k.startswith(("hbase.mapreduce.", "regionscan."))}
        conf[ROOT] = self.root
        conf[INPUT_TABLE] = self.table
        conf.setdefault(PIN_TTL, SPARK_PIN_TTL)  # a Spark read never releases its pins: let them expire,
        conf.setdefault(PIN_SHARED, "true")  # and plans of the same files share one
        if self.conf.get("token"):
            conf[REMOTE_TOKEN] = self.conf["token"]
        serde = self.read_serde()
        scan_columns = serde.scan_columns
        filters = [f for f in (self.conf.get(SCAN_FILTER), engine_filter) if f]
        if serde.needs_timestamps:
            conf[SCAN_INCLUDE_TIMESTAMP] = True
        if scan_columns:
            conf[SCAN_COLUMNS] = " ".join(scan_columns)
        elif not filters:
            conf[SCAN_KEYS_ONLY] = True  # only the row key is read: one empty cell per row is enough
        if filters:
            conf[SCAN_FILTER] = " AND ".join(f"({f})" for f in filters) if len(filters) > 1 else filters[0]
        if key_ranges is not None and fixed_key_width(serde) is not None:
            # a key range is a byte seek: the keys must have the key codec's width (connector/key_widths.py)
            return KeyCheckedInputFormat(conf, key_ranges, serde)
        return TableInputFormat(conf, key_ranges)


def store_mapping(root: str, table: str, options: Mapping[str, Any]) -> dict[str, str]:
    """Store the mapping part of (normalized) ``options`` with ``table``; returns what was stored.

    The mapping is checked first (it must parse and name a row key), so a
    bad one never reaches the table.
    """
    kept = stored_mapping.mapping_options(options)
    value = stored_mapping.encode(kept)  # refuses options without a mapping
    config = SourceConfig.from_options({**kept, ROOT: root, INPUT_TABLE: table})  # parses mapping and SerDe
    families = set(table_families(FileSystem(root), table))
    missing = sorted({c.family for c in config.write_serde().mapping.columns
                      if c.family is not None and c.family not in families})
    if missing:
        raise InvalidArgument(f"the mapping names column families {missing} that table {table} lacks "
                              f"(families: {sorted(families)})")
    set_table_values(FileSystem(root), table, {stored_mapping.MAPPING_KEY: value})
    return kept
