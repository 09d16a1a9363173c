"""A table's column mapping, stored with the table, for readers that give none.

The mapping (and the SerDe options that go with it) is kept as one
descriptor value of the table (:mod:`storage.table.descriptor`), key
:data:`MAPPING_KEY`, a JSON string (format: docs/formats/manifest.md,
"Stored column mapping")::

    {"v": 1, "options": {"hbase.columns.mapping": "key STRING :key, n INT cf:n", "serde": "binary"}}

``options`` holds the source options that say how cells become columns: the
mapping (``hbase.columns.mapping`` or ``catalog``), ``serde``, Hive's
``columns`` / ``columns.types``, SerDe properties (``serialization.null.format``,
``timestamp.formats``...) and ``regionscan.timestamp.ntz``; never where the
table is (``root``, ``table``) nor per-read settings (``hbase.mapreduce.*``,
``hbase.spark.*``, ``filter``, ``newtable``, ``token``).

A read that gives neither ``hbase.columns.mapping`` nor ``catalog`` takes the
stored options, and the options it does give win over them
(:func:`with_stored_mapping`, called by ``SourceConfig.from_options``).  A
write that gives a mapping stores it (:func:`remember`), ``regionscan mapping
set`` sets it by hand (:func:`connector.source_config.store_mapping`, which checks it first), and the Spark catalog reads it for every table.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from storage import InvalidArgument, TableNotFound
from storage.engine import FileSystem, canonical_table_name, set_table_values, table_values

from .options import CHECKED_PREFIXES, INPUT_TABLE, ROOT
from .scanning import is_remote_root

__all__ = ["MAPPING_KEY", "RECORD_VERSION", "mapping_given", "mapping_options", "encode", "decode",
           "stored_options", "with_stored_mapping", "remove", "remember", "how_to_give"]

MAPPING_KEY = "regionscan.mapping"
RECORD_VERSION = 1
_MAPPING_OPTIONS = ("hbase.columns.mapping", "catalog")
_NOT_STORED = frozenset({"path", "newtable", "token", "mode"})
_STORED_UNDER_PREFIXES = frozenset({"regionscan.timestamp.ntz"})


def mapping_given(conf: Mapping[str, Any]) -> bool:
    """True when normalized options ``conf`` carry a mapping of their own."""
    return any(conf.get(k) for k in _MAPPING_OPTIONS)


def mapping_options(conf: Mapping[str, Any]) -> dict[str, str]:
    """The options of ``conf`` (normalized) that belong to the mapping (see the module docstring)."""
    out = {}
    for key, value in conf.items():
        if key in _NOT_STORED or (key == "columns" and "columns.types" not in conf):
            continue  # ``columns`` alone prunes a read; with ``columns.types`` it names Hive's columns
        if key.startswith(CHECKED_PREFIXES) and key not in _STORED_UNDER_PREFIXES:
            continue
        out[key] = value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return out


def encode(options: Mapping[str, str]) -> str:
    """The descriptor value for mapping ``options``."""
    if not mapping_given(options):
        raise InvalidArgument("a stored mapping needs option 'hbase.columns.mapping' or 'catalog'")
    return json.dumps({"v": RECORD_VERSION, "options": dict(sorted(options.items()))}, separators=(",", ":"))


def decode(text: Any, table: str) -> dict[str, str]:
    """The mapping options of a stored value; one line naming the table when it is unreadable."""
    try:
        doc = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        doc = None
    fix = f"(set it again: regionscan mapping set {table} --root ROOT --mapping ...)"
    if not isinstance(doc, dict) or not isinstance(doc.get("options"), dict):
        raise InvalidArgument(f"table {table}'s stored mapping ({MAPPING_KEY}) is not a mapping record {fix}")
    if doc.get("v") != RECORD_VERSION:
        raise InvalidArgument(f"table {table}'s stored mapping has version {doc.get('v')!r}; "
                              f"this regionscan reads version {RECORD_VERSION} {fix}")
    options = doc["options"]
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in options.items()) or not mapping_given(options):
        raise InvalidArgument(f"table {table}'s stored mapping has no mapping option {fix}")
    return dict(options)


def stored_options(root: str, table: str) -> dict[str, str] | None:
    """The stored mapping options of ``table`` under filesystem ``root``; None when it has none.

    Raises :class:`TableNotFound` when the table does not exist.
    """
    value = table_values(FileSystem(root), table).get(MAPPING_KEY)
    return None if value is None else decode(value, table)


def how_to_give(table: str, root: str) -> str:
    """How to give a mapping, for the one-line errors."""
    return (f"give option 'hbase.columns.mapping' or 'catalog', or store one with the table: "
            f"regionscan mapping set {table} --root {root} --mapping '<mapping>'")


def with_stored_mapping(conf: dict[str, Any]) -> dict[str, Any]:
    """Normalized options ``conf``, completed by the table's stored mapping when they give none.

    Options without a root or table, or with a mapping, come back as they
    are (``SourceConfig.validate`` names what is missing).  A table without a
    stored mapping, or a ``grpc://`` root, is refused in one line saying how
    to give one.
    """
    if mapping_given(conf) or not conf.get(ROOT) or not conf.get(INPUT_TABLE):
        return conf
    root, table = str(conf[ROOT]), canonical_table_name(str(conf[INPUT_TABLE]))
    if is_remote_root(root):
        raise InvalidArgument(f"give the column mapping: option 'hbase.columns.mapping' or 'catalog' "
                              f"(stored mappings are read from a filesystem root, not {root})")
    try:
        stored = stored_options(root, table)
    except TableNotFound as missing:
        # the missing table first: a read of a mistyped name is told so, a write that creates the table what to give
        raise InvalidArgument(f"{missing}, so it has no stored mapping: give option 'hbase.columns.mapping' "
                              "or 'catalog'") from None
    if stored is None:
        raise InvalidArgument(f"table {table} under {root} has no stored column mapping: {how_to_give(table, root)}")
    return {**stored, **conf}


def remove(root: str, table: str) -> bool:
    """Remove ``table``'s stored mapping; False when it had none."""
    fs = FileSystem(root)
    if MAPPING_KEY not in table_values(fs, table):
        return False
    set_table_values(fs, table, {MAPPING_KEY: None})
    return True


def remember(root: str, table: str, options: Mapping[str, Any], replace: bool) -> bool:
    """After a write that gave a mapping: store it when the table has none, or when ``replace``
    (the write created or overwrote the table).  Returns True when it stored it."""
    if not mapping_given(options):
        return False
    kept = mapping_options(options)
    current = table_values(FileSystem(root), table).get(MAPPING_KEY)
    if current is not None and not replace:
        return False
    if current is not None and current == encode(kept):
        return False
    set_table_values(FileSystem(root), table, {MAPPING_KEY: encode(kept)})
    return True
