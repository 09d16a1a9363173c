"""What a root holds, and the one message for a table it does not hold.

Every front end that opens a table by name (the embedded connection, table
settings, the connector's splits, the Spark source, the jobs) reports a
missing table through :func:`missing_table`, so a mistyped name or root reads
the same everywhere and says what is there instead: no root folder, no such
namespace, or the tables the namespace holds, the closest names first.
"""

from __future__ import annotations

from ..namespaces import (
    DEFAULT_NAMESPACE,
    NAMESPACE_MARKER,
    is_namespace_dir,
    namespace_dir,
    parse_table_name,
)
from ..names import name_hint
from ..region.manifest import TABLE_MANIFEST
from ..vfs.fs import FileSystem

__all__ = ["namespace_tables", "missing_table", "absent_from"]


def namespace_tables(root: FileSystem, namespace: str) -> list[str]:
    """The tables of one namespace, sorted, as a user names them: bare in
    ``default``, ``ns:table`` elsewhere."""
    folder = namespace_dir(namespace)
    if not root.is_dir(folder):
        return []
    names = []
    for entry in sorted(root.listdir(folder)):
        path = f"{folder}/{entry}" if folder else entry
        # a dot name is never a table (a table being deleted is moved to one)
        if not is_namespace_dir(entry) and not entry.startswith(".") and root.exists(f"{path}/{TABLE_MANIFEST}"):
            names.append(entry if namespace == DEFAULT_NAMESPACE else f"{namespace}:{entry}")
    return names


def missing_table(root: FileSystem, name: str, shown_root: str | None = None) -> str:
    """One line saying why table ``name`` is not under ``root``
    (``shown_root``: the root as the user gave it; its URI otherwise)."""
    where = shown_root or root.uri()
    if not root.is_dir(""):
        return f"table {name} does not exist: there is no root folder {where} (a mistyped root?)"
    namespace = parse_table_name(name).namespace
    if namespace != DEFAULT_NAMESPACE and not root.exists(f"{namespace_dir(namespace)}/{NAMESPACE_MARKER}"):
        return f"table {name} does not exist: there is no namespace {namespace} under {where}"
    return absent_from(name, f"under {where}", namespace_tables(root, namespace))


def absent_from(name: str, where: str, tables: list[str]) -> str:
    """The line for table ``name`` missing from a namespace that holds
    ``tables`` (``where``: ``under ROOT``, ``on grpc://...``), the closest
    names first."""
    namespace = parse_table_name(name).namespace
    holder = "" if namespace == DEFAULT_NAMESPACE else f"namespace {namespace}"
    return f"table {name} does not exist {where} {name_hint(name, tables, 'tables', holder)}"
