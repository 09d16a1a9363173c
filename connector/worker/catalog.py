"""The engine worker's ``catalog`` op: what the Spark catalog (``RegionScanCatalog``) asks.

One op with an ``action`` (connector/java/PROTOCOL.md): namespaces and
tables of a root as HBase names them (namespace ``default`` holds the bare
names), a table's schema from its stored mapping
(:mod:`connector.stored_mapping`), and the admin calls ``createTable``,
``dropTable``, ``createNamespace`` and ``dropNamespace`` make.  Every
answer comes from the embedded API (``storage.connect``) and the Python
source's own option parsing, so the catalog and ``format("regionscan")``
see the same tables and columns.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import storage
from storage import DEFAULT_NAMESPACE, InvalidArgument, NamespaceNotFound, TableNotFound
from storage.engine import FileSystem, validate_table_name

from .. import stored_mapping
from ..options import INPUT_TABLE, ROOT, normalize_conf
from ..scanning import is_remote_root
from ..source_config import SourceConfig

__all__ = ["catalog", "derive_mapping", "ACTIONS"]

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _root(req: dict) -> str:
    root = str((req.get("options") or {}).get("root") or "")
    if not root:
        raise InvalidArgument("the regionscan catalog needs its root: spark.sql.catalog.<name>.root=<path or URI>")
    if is_remote_root(root):
        raise InvalidArgument(f"the regionscan catalog reads a filesystem root (a path or URI), not {root}")
    return root


def _namespace(req: dict) -> str:
    ns = req.get("namespace")
    if not isinstance(ns, str) or not ns:
        raise InvalidArgument("the catalog request names no namespace")
    return ns


def _table(req: dict) -> str:
    name = (req.get("options") or {}).get("table")
    if not isinstance(name, str) or not name:
        raise InvalidArgument("the catalog request names no table")
    return validate_table_name(name)


def _connect(root: str, read_only: bool = True):
    return storage.connect(root, read_only=read_only, block_cache_size=0)


def _root_exists(root: str) -> bool:
    return FileSystem(root).is_dir("")


def _namespaces(req: dict) -> dict:
    root = _root(req)
    if not _root_exists(root):
        return {"namespaces": [DEFAULT_NAMESPACE]}
    with _connect(root) as conn:
        return {"namespaces": conn.list_namespaces()}


def _tables(req: dict) -> dict:
    root, ns = _root(req), _namespace(req)
    if not _root_exists(root):
        return {"exists": ns == DEFAULT_NAMESPACE, "tables": []}
    with _connect(root) as conn:
        try:
            names = [t.decode() for t in conn.tables(namespace=ns)]
        except NamespaceNotFound:
            return {"exists": False, "tables": []}
    return {"exists": True, "tables": [n.split(":", 1)[1] if ":" in n else n for n in names]}


def _table_info(req: dict) -> dict:
    """``exists``; for a table that exists, ``ddl`` and the stored ``mapping`` options, or ``error``
    (one line: how to give a mapping) when it has none."""
    options = dict(req.get("options") or {})
    root, name = _root(req), _table(req)
    if not _root_exists(root):
        return {"exists": False}
    try:
        stored = stored_mapping.stored_options(root, name)
    except TableNotFound:
        return {"exists": False}
    if stored is None and not stored_mapping.mapping_given(normalize_conf(options)):
        return {"exists": True, "ddl": None,
                "error": f"table {name} under {root} has no stored column mapping: "
                         f"{stored_mapping.how_to_give(name, root)}"}
    config = SourceConfig.from_options({**options, "root": root, "table": name})
    return {"exists": True, "ddl": config.schema_ddl(), "mapping": stored or {}}


def derive_mapping(schema_json: str) -> str:
    """An hbase-spark mapping for a CREATE TABLE schema: the first column is the row key, every
    other column is named ``family:qualifier``; anything else is refused in one line."""
    from pyspark.sql.types import StructType

    fields = StructType.fromJson(json.loads(schema_json)).fields
    if len(fields) < 2:
        raise InvalidArgument("CREATE TABLE needs a row key column and at least one 'family:qualifier' column, "
                              "or TBLPROPERTIES ('hbase.columns.mapping' = '...')")
    parts = []
    for i, f in enumerate(fields):
        quoted = "`" + f.name.replace("`", "``") + "`"
        kind = f.dataType.simpleString()
        if i == 0:
            parts.append(f"{quoted} {kind} :key")
            continue
        family, sep, qualifier = f.name.partition(":")
        if not sep or not _PLAIN_NAME.fullmatch(family) or not qualifier:
            raise InvalidArgument(f"column {f.name!r} is not named 'family:qualifier', so it maps to no cell: "
                                  "name it so (`cf:a` INT) or give TBLPROPERTIES ('hbase.columns.mapping' = '...')")
        parts.append(f"{quoted} {kind} {family}:{qualifier}")
    return ", ".join(parts)


def _create(req: dict) -> dict:
    """Create a table whose families come from the mapping (given, or derived from ``schema``) and
    store the mapping with it; ``regions`` (default 1) uniform regions."""
    root, name = _root(req), _table(req)
    options = normalize_conf(dict(req.get("options") or {}))
    if not stored_mapping.mapping_given(options):
        schema = req.get("schema")
        if not isinstance(schema, str):
            raise InvalidArgument("CREATE TABLE needs columns or TBLPROPERTIES ('hbase.columns.mapping' = '...')")
        options["hbase.columns.mapping"] = derive_mapping(schema)
    regions = req.get("regions", 1)
    if not isinstance(regions, int) or isinstance(regions, bool) or not 1 <= regions <= 4096:
        raise InvalidArgument(f"regions must be an integer in [1, 4096], got {regions!r}")
    config = SourceConfig.from_options({**options, ROOT: root, INPUT_TABLE: name})
    families = sorted({c.family for c in config.write_serde().mapping.columns if c.family is not None})
    if not families:
        raise InvalidArgument("the mapping of a new table must name at least one column family")
    with _connect(root, read_only=False) as conn:
        conn.create_table(name, {f: {} for f in families}, num_regions=regions if regions > 1 else None)
        conn.set_table_values(name, {stored_mapping.MAPPING_KEY: stored_mapping.encode(
            stored_mapping.mapping_options(options))})
    return {"ddl": config.schema_ddl(), "families": families}


def _drop(req: dict) -> dict:
    root, name = _root(req), _table(req)
    if not _root_exists(root):
        return {"dropped": False}
    with _connect(root, read_only=False) as conn:
        try:
            conn.delete_table(name)
        except TableNotFound:
            return {"dropped": False}
    return {"dropped": True}


def _create_namespace(req: dict) -> dict:
    with _connect(_root(req), read_only=False) as conn:
        conn.create_namespace(_namespace(req))
    return {}


def _drop_namespace(req: dict) -> dict:
    root, ns = _root(req), _namespace(req)
    if not _root_exists(root):
        return {"dropped": False}
    with _connect(root, read_only=False) as conn:
        try:
            if req.get("cascade") is True:
                for table in conn.tables(namespace=ns):
                    conn.delete_table(table)
            conn.delete_namespace(ns)
        except NamespaceNotFound:
            return {"dropped": False}
    return {"dropped": True}


ACTIONS: dict[str, Callable[[dict], dict]] = {
    "namespaces": _namespaces, "tables": _tables, "table": _table_info, "create": _create, "drop": _drop,
    "create_namespace": _create_namespace, "drop_namespace": _drop_namespace,
}


def catalog(req: dict) -> dict[str, Any]:
    """Answer one catalog request (its ``action`` names what)."""
    action = req.get("action")
    handler = ACTIONS.get(action) if isinstance(action, str) else None
    if handler is None:
        raise InvalidArgument(f"unknown catalog action {action!r} (one of {', '.join(ACTIONS)})")
    return handler(req)
