"""Table and column-family settings, and the names the engine accepts.

Family settings take HBase's names (``max_versions``, ``ttl``, ``block_size``,
``compression``, ``bloom_filter``) and the spellings happybase users pass to
``create_table`` (``time_to_live``, ``bloom_filter_type``, ``"NONE"``...).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from .errors import InvalidArgument

__all__ = [
    "FamilySettings",
    "TableSettings",
    "validate_table_name",
    "validate_family_name",
]

_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
_FAMILY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}$")

_COMPRESSIONS = {None: None, "none": None, "lz4": "lz4", "zstd": "zstd"}


def validate_table_name(name: str) -> str:
    """Return ``name`` if it is a legal table name, else raise InvalidArgument.

    Names are letters, digits, ``_``, ``-`` and ``.``, not starting with
    ``.`` or ``-``, so a table name can never reach outside the root.
    """
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidArgument(
            f"invalid table name {name!r}: use 1-128 letters, digits, '_', '-' or '.', not starting with '.' or '-'"
        )
    return name


def validate_family_name(name: str | bytes) -> str:
    """Return the family name as ``str`` if legal, else raise InvalidArgument."""
    if isinstance(name, bytes):
        try:
            name = name.decode("ascii")
        except UnicodeDecodeError:
            raise InvalidArgument(f"invalid column family name {name!r}: must be ASCII") from None
    if not isinstance(name, str) or not _FAMILY_RE.match(name):
        raise InvalidArgument(
            f"invalid column family name {name!r}: use 1-64 letters, digits, '_', '-' or '.'"
        )
    return name


@dataclass(frozen=True)
class FamilySettings:
    """Settings of one column family (HBase's HColumnDescriptor)."""

    max_versions: int = 1
    ttl: int | None = None  # seconds; None keeps cells forever
    block_size: int = 65536
    compression: str | None = None  # None, "lz4" or "zstd"
    bloom_filter: bool = True  # a row bloom filter per store file
    min_versions: int = 0

    @classmethod
    def from_options(cls, options: dict | None, family: str = "?") -> "FamilySettings":
        """Build settings from a happybase-style options dict, naming any bad key or value."""
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
                raise InvalidArgument(f"unknown setting {key!r} for column family {family!r}")
            values[key] = value
        if "bloom_filter" in values:
            bloom = values["bloom_filter"]
            if isinstance(bloom, str):
                if bloom.upper() not in ("ROW", "NONE"):
                    raise InvalidArgument(f"bloom_filter for family {family!r} must be ROW or NONE, got {bloom!r}")
                bloom = bloom.upper() == "ROW"
            values["bloom_filter"] = bool(bloom)
        if "compression" in values:
            comp = values["compression"]
            key = comp.lower() if isinstance(comp, str) else comp
            if key not in _COMPRESSIONS:
                raise InvalidArgument(f"compression for family {family!r} must be NONE, LZ4 or ZSTD, got {comp!r}")
            values["compression"] = _COMPRESSIONS[key]
        if "ttl" in values and values["ttl"] is not None:
            ttl = values["ttl"]
            if not isinstance(ttl, int) or ttl <= 0 or ttl >= 2**31 - 1:
                # HBase writes FOREVER as Integer.MAX_VALUE
                if ttl == 2**31 - 1 or ttl == -1:
                    values["ttl"] = None
                else:
                    raise InvalidArgument(f"ttl for family {family!r} must be a positive number of seconds, got {ttl!r}")
        for name in ("max_versions", "block_size"):
            if name in values:
                v = values[name]
                if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                    raise InvalidArgument(f"{name} for family {family!r} must be a positive integer, got {v!r}")
        if values.get("block_size", 65536) < 256:
            raise InvalidArgument(f"block_size for family {family!r} must be at least 256 bytes")
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
        options = dict(options or {})
        values = {}
        for key, value in options.items():
            if key not in cls.__dataclass_fields__:
                raise InvalidArgument(f"unknown table setting {key!r}")
            values[key] = value
        for name in ("memstore_flush_size", "max_filesize", "compaction_threshold", "compaction_max_files"):
            if name in values and (not isinstance(values[name], int) or values[name] < 1):
                raise InvalidArgument(f"{name} must be a positive integer, got {values[name]!r}")
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)
