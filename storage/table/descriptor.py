"""A table's descriptor values: the user's own key/value metadata kept with the table.

HBase keeps such values in the table descriptor (``TableDescriptor.getValue`` /
``setValue``, the shell's ``alter 't', METADATA => {...}``).  Here they are the
``extra`` object of the table's settings, in the table manifest
(docs/formats/manifest.md): keys are strings, a value set through this module
is a string, and the engine interprets one of them only:
``hbase.server.keyvalue.maxsize`` (:data:`MAX_CELL_SIZE_KEY`), the largest cell a
write may carry, as in HBase (10 MiB unless set; 0 or less: no limit).  The
Spark connector keeps a table's column mapping under ``regionscan.mapping``;
storage does not know what it means.

A change rewrites the table manifest with ``write_atomic`` (temporary file,
fsync, rename), holding the table's writer lock, so a crash leaves the old or
the new values, never a mix, and no writer process changes the manifest at the
same time.  Reading needs no lock: :func:`table_values` reads the manifest.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import InvalidArgument, TableNotFound
from ..namespaces import table_dir
from ..region.manifest import TABLE_LOCK, TABLE_MANIFEST, TableManifest
from ..schema import TableSettings, validate_table_name
from ..vfs.fs import FileSystem
from .missing import missing_table

__all__ = [
    "table_values", "table_families", "set_table_values", "updated_manifest", "MAX_CELL_SIZE_KEY",
    "DEFAULT_MAX_CELL_SIZE", "cell_size_limit",
]

MAX_CELL_SIZE_KEY = "hbase.server.keyvalue.maxsize"
"""The descriptor value that sets the largest cell (row, column and value bytes) a write may carry."""

DEFAULT_MAX_CELL_SIZE = 10 << 20
"""HBase's default for ``hbase.server.keyvalue.maxsize``: 10 MiB."""


def cell_size_limit(extra: Mapping[str, Any] | None) -> int | None:
    """The cell size limit the descriptor values ``extra`` set (None: no limit)."""
    raw = (extra or {}).get(MAX_CELL_SIZE_KEY)
    if raw is None:
        return DEFAULT_MAX_CELL_SIZE
    try:
        limit = int(raw)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{MAX_CELL_SIZE_KEY} must be a whole number of bytes, got {raw!r}"[:200]) from None
    return limit if limit > 0 else None

def _load(root: FileSystem, name: str) -> tuple[FileSystem, TableManifest]:
    tfs = root.sub(table_dir(name))
    if not tfs.exists(TABLE_MANIFEST):
        raise TableNotFound(missing_table(root, name))
    return tfs, TableManifest.load(tfs)


def table_values(root: FileSystem, name: str | bytes) -> dict[str, Any]:
    """The descriptor values of table ``name`` under ``root`` (a copy), read from its manifest.

    Raises :class:`TableNotFound` when the table does not exist.
    """
    _, manifest = _load(root, validate_table_name(name))
    return dict(manifest.settings.get("extra") or {})


def table_families(root: FileSystem, name: str | bytes) -> list[str]:
    """The column family names of table ``name`` under ``root``, read from its manifest."""
    _, manifest = _load(root, validate_table_name(name))
    return sorted(manifest.families)


def _check_updates(updates: Mapping[str, str | None]) -> dict[str, str | None]:
    if not isinstance(updates, Mapping) or not updates:
        raise InvalidArgument("descriptor value updates must be a non-empty dict of key -> string (None removes)")
    for key, value in updates.items():
        if not isinstance(key, str) or not key:
            raise InvalidArgument(f"a descriptor value key must be a non-empty string, got {key!r}"[:200])
        if value is not None and not isinstance(value, str):
            raise InvalidArgument(f"descriptor value {key!r} must be a string or None, got {type(value).__name__}")
        if key == MAX_CELL_SIZE_KEY and value is not None:
            cell_size_limit({key: value})  # refused now, not at the next write
    return dict(updates)


def updated_manifest(manifest: TableManifest, updates: Mapping[str, str | None]) -> TableManifest:
    """A copy of ``manifest`` with ``updates`` applied to its values (None removes a key); checked
    as every table setting is (``extra`` at most 64 KiB of JSON) before anything is written."""
    updates = _check_updates(updates)
    extra = dict(manifest.settings.get("extra") or {})
    for key, value in updates.items():
        if value is None:
            extra.pop(key, None)
        else:
            extra[key] = value
    settings = TableSettings.from_options({**manifest.settings, "extra": extra}).to_dict()
    return TableManifest(manifest.name, manifest.families, settings, list(manifest.regions),
                         manifest.next_region_id, manifest.generation)


def set_table_values(root: FileSystem, name: str | bytes, updates: Mapping[str, str | None]) -> dict[str, Any]:
    """Set (or with None remove) descriptor values of a table that no process has open for writing.

    Takes the table's writer lock (:class:`~storage.errors.TableLocked` when a
    writer holds it: change the values through that writer's
    ``Connection.set_table_values`` instead), rewrites the manifest atomically
    and returns the new values.
    """
    name = validate_table_name(name)
    updates = _check_updates(updates)
    tfs = root.sub(table_dir(name))
    if not tfs.exists(TABLE_MANIFEST):
        raise TableNotFound(missing_table(root, name))
    with tfs.lock(TABLE_LOCK):
        _, manifest = _load(root, name)  # read under the lock: no split saves between read and write
        new = updated_manifest(manifest, updates)
        new.save(tfs)
        return dict(new.settings.get("extra") or {})
