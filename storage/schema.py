"""Table and column-family settings, and the names the engine accepts.

Family settings take HBase's names (``max_versions``, ``ttl``, ``block_size``,
``compression``, ``bloom_filter``, ``keep_deleted_cells``) and the spellings happybase users pass to
``create_table`` (``time_to_live``, ``bloom_filter_type``, ``"NONE"``...).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field

from .errors import InvalidArgument, clip
from .namespaces import canonical_table_name
from .names import name_hint
from .wal.format import SyncPolicy  # the WAL owns the spelling of its sync policy

__all__ = [
    "FamilySettings",
    "TableSettings",
    "validate_table_name",
    "validate_family_name",
    "keep_deleted_mode",
    "KEEP_DELETED_MODES",
    "no_such_family",
]

def no_such_family(table: str, family: bytes, families) -> InvalidArgument:
    """The error of a write or read naming a family table ``table`` lacks, with
    the families it has (``families``: their names), the closest first."""
    hint = name_hint(family.decode("ascii", "replace"), sorted(families), "families")
    return InvalidArgument(f"table {table} has no column family {clip(repr(family))} {hint}")


KEEP_DELETED_MODES = ("FALSE", "TRUE", "TTL")
"""The values of HBase's KEEP_DELETED_CELLS, as stored in a family's settings."""


def keep_deleted_mode(value: object, family: str = "?") -> str:
    """``value`` (a bool or ``FALSE`` / ``TRUE`` / ``TTL`` in any case) as one of
    :data:`KEEP_DELETED_MODES`, else InvalidArgument naming the family."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str) and value.upper() in KEEP_DELETED_MODES:
        return value.upper()
    raise InvalidArgument(
        f"keep_deleted_cells for family {family!r} must be FALSE, TRUE or TTL, got {clip(repr(value))}"
    )

# fullmatch, not match with "$": "$" also matches before a trailing newline.
_FAMILY_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}")

# Bounds of the settings (inclusive).  Block sizes follow HBase's check
# ("between 1K and 16MB"), with a lower floor for tests of many blocks;
# the other upper bounds keep a typo (2**40) from reaching a flush.
_BLOCK_SIZE = (256, 16 << 20)
_MAX_VERSIONS = (1, 2**31 - 1)
_TTL_SECONDS = (1, 2**31 - 2)
_TABLE_INT_BOUNDS = {
    "memstore_flush_size": (1024, 1 << 40),
    "max_filesize": (1024, 1 << 50),
    "compaction_threshold": (1, 10_000),
    "compaction_max_files": (1, 10_000),
}
_EXTRA_LIMIT = 64 << 10  # bytes of the JSON form of TableSettings.extra

_COMPRESSIONS = {None: None, "none": None, "lz4": "lz4", "zstd": "zstd", "auto": "auto"}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bounded_int(value: object, name: str, bounds: tuple[int, int], where: str, unit: str = "") -> int:
    """``value`` if it is an int within ``bounds``, else InvalidArgument naming the setting."""
    lo, hi = bounds
    if not _is_int(value) or not lo <= value <= hi:
        unit = f" {unit}" if unit else ""
        raise InvalidArgument(f"{name}{where} must be an integer in [{lo}, {hi}]{unit}, got {clip(repr(value))}")
    return value


def validate_table_name(name: str | bytes) -> str:
    """Return the canonical spelling of a legal table name, else raise InvalidArgument.

    A name is ``table`` or ``namespace:table`` (storage.namespaces); ``default:t``
    comes back as ``t``.  Qualifiers are letters, digits, ``_``, ``-`` and ``.``,
    not starting with ``.`` or ``-``, so a table name can never reach outside the root.
    """
    return canonical_table_name(name)


def validate_family_name(name: str | bytes) -> str:
    """Return the family name as ``str`` if legal, else raise InvalidArgument."""
    if isinstance(name, bytes):
        try:
            name = name.decode("ascii")
        except UnicodeDecodeError:
            raise InvalidArgument(f"invalid column family name {clip(repr(name))}: must be ASCII") from None
    if not isinstance(name, str) or not _FAMILY_RE.fullmatch(name):
        raise InvalidArgument(
            f"invalid column family name {clip(repr(name))}: use 1-64 letters, digits, '_', '-' or '.'"
        )
    return name


@dataclass(frozen=True)
class FamilySettings:
    """Settings of one column family (HBase's HColumnDescriptor)."""

    max_versions: int = 1
    ttl: int | None = None  # seconds; None keeps cells forever
    block_size: int = 65536
    # None, "lz4", "zstd" or "auto" (the default): each store file takes zstd when its first
    # block is dense, lz4 when it holds versions or markers (storage.storefile.codecs.AUTO;
    # docs/decisions/2026-12-05-column-chunks-sweep.md, 2026-12-05-benchmark-regressions.md)
    compression: str | None = "auto"
    bloom_filter: bool = True  # a row bloom filter per store file
    min_versions: int = 0
    keep_deleted_cells: str = "FALSE"  # HBase's KEEP_DELETED_CELLS: "FALSE", "TRUE" or "TTL"

    @classmethod
    def from_options(cls, options: dict | None, family: str = "?") -> "FamilySettings":
        """Build settings from a happybase-style options dict, naming any bad key or value."""
        if options is not None and not isinstance(options, dict):
            raise InvalidArgument(f"options of column family {family!r} must be a dict, got {type(options).__name__}")
        options = dict(options or {})
        values: dict = {}
        aliases = {
            "time_to_live": "ttl",
            "bloom_filter_type": "bloom_filter",
            "blocksize": "block_size",
            "versions": "max_versions",
        }
        ignored = {"in_memory", "block_cache_enabled", "bloom_filter_vector_size", "bloom_filter_nb_hashes"}
        for key, value in options.items():
            key = aliases.get(key, key)
            if key in ignored:
                continue
            if key not in cls.__dataclass_fields__:
                known = sorted(cls.__dataclass_fields__) + sorted(aliases)
                hint = name_hint(key, known, "settings") if isinstance(key, str) else f"(settings: {', '.join(known)})"
                raise InvalidArgument(f"unknown setting {clip(repr(key))} for column family {family!r} {hint}")
            values[key] = value
        if "bloom_filter" in values:
            bloom = values["bloom_filter"]
            if isinstance(bloom, str):
                if bloom.upper() not in ("ROW", "NONE"):
                    raise InvalidArgument(
                        f"bloom_filter for family {family!r} must be ROW or NONE, got {clip(repr(bloom))}"
                    )
                bloom = bloom.upper() == "ROW"
            elif not isinstance(bloom, bool):
                raise InvalidArgument(
                    f"bloom_filter for family {family!r} must be true, false, ROW or NONE, got {clip(repr(bloom))}"
                )
            values["bloom_filter"] = bloom
        if "compression" in values:
            comp = values["compression"]
            key = comp.lower() if isinstance(comp, str) else comp
            if not isinstance(key, (str, type(None))) or key not in _COMPRESSIONS:
                raise InvalidArgument(
                    f"compression for family {family!r} must be NONE, LZ4, ZSTD or AUTO, got {clip(repr(comp))}"
                )
            values["compression"] = _COMPRESSIONS[key]
        if "ttl" in values and values["ttl"] is not None:
            ttl = values["ttl"]
            if ttl in (2**31 - 1, -1) and _is_int(ttl):  # HBase writes FOREVER as Integer.MAX_VALUE
                values["ttl"] = None
            else:
                values["ttl"] = _bounded_int(ttl, "ttl", _TTL_SECONDS, f" for family {family!r}", "seconds")
        if "max_versions" in values:
            values["max_versions"] = _bounded_int(values["max_versions"], "max_versions", _MAX_VERSIONS, f" for family {family!r}")
        if "min_versions" in values:
            values["min_versions"] = _bounded_int(
                values["min_versions"], "min_versions", (0, values.get("max_versions", 1)), f" for family {family!r}"
            )
        if "keep_deleted_cells" in values:
            values["keep_deleted_cells"] = keep_deleted_mode(values["keep_deleted_cells"], family)
        if "block_size" in values:
            values["block_size"] = _bounded_int(values["block_size"], "block_size", _BLOCK_SIZE, f" for family {family!r}", "bytes")
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TableSettings:
    """Per-table tuning, with the HBase property each mirrors."""

    memstore_flush_size: int = 64 << 20  # hbase.hregion.memstore.flush.size
    max_filesize: int = 1 << 30  # hbase.hregion.max.filesize: split past this
    compaction_threshold: int = 3  # hbase.hstore.compactionThreshold
    compaction_max_files: int = 10  # hbase.hstore.compaction.max
    wal_sync: str = "each"  # "each", "none" or e.g. "100ms"
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: dict | None) -> "TableSettings":
        """Build settings from a dict, checking every value and its bounds before anything is written."""
        if options is not None and not isinstance(options, dict):
            raise InvalidArgument(f"table settings must be a dict, got {type(options).__name__}")
        options = dict(options or {})
        values = {}
        for key, value in options.items():
            if key not in cls.__dataclass_fields__:
                known = sorted(cls.__dataclass_fields__)
                hint = name_hint(key, known, "table settings") if isinstance(key, str) else f"(table settings: {', '.join(known)})"
                raise InvalidArgument(f"unknown table setting {clip(repr(key))} {hint}")
            values[key] = value
        for name, bounds in _TABLE_INT_BOUNDS.items():
            if name in values:
                values[name] = _bounded_int(values[name], name, bounds, "", "")
        if "wal_sync" in values:
            try:
                values["wal_sync"] = str(SyncPolicy.parse(values["wal_sync"]))
            except InvalidArgument:
                raise InvalidArgument(
                    f"wal_sync must be 'each', 'none', '<N>ms' or an int of ms, got {clip(repr(values['wal_sync']))}"
                ) from None
        if "extra" in values:
            extra = values["extra"]
            try:
                size = len(json.dumps(extra)) if isinstance(extra, dict) else -1
            except (TypeError, ValueError, RecursionError):
                size = -1
            if size < 0 or size > _EXTRA_LIMIT:
                raise InvalidArgument(f"extra must be a JSON object of at most {_EXTRA_LIMIT} bytes")
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)
