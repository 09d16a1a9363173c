"""Connections: the entry point of the embedded store, shaped like happybase.

``storage.connect(path)`` opens a root directory whose subdirectories are
tables, grouped in namespaces as HBase's are (``ns:table``; a bare name is in
``default``; the layout is in storage/namespaces.py).  Connecting creates nothing: the root folder is made with its first
table, so a mistyped root shows up as "table ... does not exist (no root
folder ...)" instead of a new empty folder.  A connection opened for writing holds each
table's writer lock while the table is open, so two writer processes cannot
open one table at once; ``read_only=True`` connections take no lock.
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

from ..errors import (
    InvalidArgument,
    NamespaceExists,
    NamespaceNotEmpty,
    NamespaceNotFound,
    TableExists,
    TableNotFound,
)
from ..vfs.fs import FileSystem
from .missing import missing_table, namespace_tables
from .trash import clean_trash, trash_name
from ..region.manifest import TABLE_LOCK, TABLE_MANIFEST, RegionInfo, TableManifest
from ..namespaces import (
    DEFAULT_NAMESPACE,
    NAMESPACE_MARKER,
    is_namespace_dir,
    namespace_dir,
    parse_table_name,
    table_dir,
    validate_namespace,
)
from ..schema import FamilySettings, TableSettings, validate_family_name, validate_table_name
from ..storefile import BlockCache
from ..storefile.cache import check_cache_results
from .table import Table

__all__ = ["Connection", "connect", "uniform_split_keys"]



def uniform_split_keys(num_regions: int, first_row: bytes = b"\x00", last_row: bytes = b"\xff") -> list[bytes]:
    """Split keys that cut [first_row, last_row] into ``num_regions`` even parts.

    Like HBase's UniformSplit: keys are treated as big-endian numbers of a
    common width; with the defaults the first byte is cut evenly.
    """
    if not isinstance(num_regions, int) or num_regions < 1:
        raise InvalidArgument(f"num_regions must be a positive int, got {num_regions!r}")
    width = max(len(first_row), len(last_row), 1)
    lo = int.from_bytes(first_row.ljust(width, b"\x00"), "big")
    hi = int.from_bytes(last_row.ljust(width, b"\xff"), "big")
    if hi - lo + 1 < num_regions:
        raise InvalidArgument(f"cannot cut [{first_row!r}, {last_row!r}] into {num_regions} regions")
    keys = []
    for i in range(1, num_regions):
        k = (lo + (hi - lo + 1) * i // num_regions).to_bytes(width, "big").rstrip(b"\x00") or b"\x00"
        if not keys or k > keys[-1]:
            keys.append(k)
    return keys


class Connection:
    """A root of tables on a local path or a pyarrow filesystem URI."""

    def __init__(
        self,
        root: str,
        *,
        read_only: bool = False,
        block_cache_size: int = 256 << 20,
        cache_results: bool = False,
        wal_sync: str | None = None,
        filesystem: FileSystem | None = None,
    ):
        self.root = root
        # ``filesystem``: the layer to go through instead of FileSystem(root),
        # e.g. a storage.vfs.faultfs.FaultFileSystem over the same root in tests.
        self.fs = filesystem if filesystem is not None else FileSystem(root)
        self.read_only = read_only
        self.wal_sync = wal_sync
        if read_only and not self.fs.is_dir(""):
            raise TableNotFound(f"root {self.fs.uri()} does not exist")
        # cache_results: whether scans that do not say keep their results in the block cache
        # (storage/storefile/cache_memo.py); checked even without a cache, so a typo is loud
        self.block_cache = BlockCache(block_cache_size, check_cache_results(cache_results)) if block_cache_size else None
        if not read_only and self.fs.is_local:
            clean_trash(self.fs)  # tables dropped by a process that died before its scans ended
        self._tables: dict[str, Table] = {}
        self._mutex = threading.RLock()
        self.closed = False

    # -- namespaces --------------------------------------------------------
    def create_namespace(self, name: str | bytes) -> None:
        """Create a namespace (HBase's ``create_namespace``); tables in it are ``name:table``."""
        self._check_writable()
        name = validate_namespace(name, creating=True)
        with self._mutex:
            marker = f"{namespace_dir(name)}/{NAMESPACE_MARKER}"
            if self.fs.exists(marker):
                raise NamespaceExists(f"namespace {name} already exists under {self.fs.uri()}")
            self.fs.makedirs(namespace_dir(name))
            self.fs.write_atomic(marker, b"regionscan namespace\n")

    def list_namespaces(self) -> list[str]:
        """Names of the namespaces under the root, ``default`` first (HBase's ``list_namespace``)."""
        found = [
            entry[1:]
            for entry in (self.fs.listdir("") if self.fs.is_dir("") else [])
            if is_namespace_dir(entry) and self.fs.exists(f"{entry}/{NAMESPACE_MARKER}")
        ]
        return [DEFAULT_NAMESPACE] + sorted(found)

    def delete_namespace(self, name: str | bytes) -> None:
        """Drop an empty namespace; one that still holds tables is refused, as HBase refuses it."""
        self._check_writable()
        name = validate_namespace(name, creating=True)
        with self._mutex:
            self._check_namespace(name)
            held = self.tables(namespace=name)
            if held:
                shown = ", ".join(t.decode() for t in held[:5])
                raise NamespaceNotEmpty(f"namespace {name} still holds {len(held)} table(s) ({shown}): delete them first")
            self.fs.delete_dir(namespace_dir(name))

    def _check_namespace(self, namespace: str) -> None:
        if namespace != DEFAULT_NAMESPACE and not self.fs.exists(f"{namespace_dir(namespace)}/{NAMESPACE_MARKER}"):
            raise NamespaceNotFound(f"namespace {namespace} does not exist under {self.fs.uri()} (create_namespace first)")

    # -- admin -----------------------------------------------------------
    def tables(self, namespace: str | bytes | None = None) -> list[bytes]:
        """Names of the tables under the root (bytes, as happybase returns them).

        Tables of ``default`` come as bare names and others as ``ns:table``, as
        HBase lists them; ``namespace`` lists one namespace only.
        """
        spaces = self.list_namespaces() if namespace is None else [validate_namespace(namespace)]
        names: list[bytes] = []
        for space in spaces:
            if namespace is not None:
                self._check_namespace(space)
            names.extend(name.encode() for name in namespace_tables(self.fs, space))
        return names

    def is_table_available(self, name: str | bytes) -> bool:
        name = validate_table_name(name)
        return self.fs.exists(f"{table_dir(name)}/{TABLE_MANIFEST}")

    def create_table(
        self,
        name: str | bytes,
        families: dict,
        split_keys: Sequence[bytes] | None = None,
        num_regions: int | None = None,
        settings: dict | None = None,
    ) -> Table:
        """Create a table with ``families`` (``{"cf": {"max_versions": 3}}``), pre-split.

        Give ``split_keys`` (sorted, distinct, non-empty row keys) or
        ``num_regions`` (uniform split of the first key byte).  ``settings``
        sets table tuning such as ``memstore_flush_size`` or ``wal_sync``.
        """
        self._check_writable()
        name = validate_table_name(name)
        if not isinstance(families, dict) or not families:
            raise InvalidArgument("families must be a non-empty dict of family name -> options dict")
        fams = {}
        for fam, options in families.items():
            fam_name = validate_family_name(fam)
            if fam_name in fams:
                raise InvalidArgument(f"column family {fam_name!r} given twice")
            fams[fam_name] = FamilySettings.from_options(options, fam_name).to_dict()
        if split_keys is not None and num_regions is not None:
            raise InvalidArgument("give split_keys or num_regions, not both")
        if num_regions is not None:
            split_keys = uniform_split_keys(num_regions)
        keys = list(split_keys or [])
        for k in keys:
            if not isinstance(k, bytes) or not k:
                raise InvalidArgument(f"split keys must be non-empty bytes, got {k!r}")
        if keys != sorted(set(keys)):
            raise InvalidArgument("split keys must be sorted and distinct")
        table_settings = dict(settings or {})
        if self.wal_sync is not None:
            table_settings.setdefault("wal_sync", self.wal_sync)
        table_settings = TableSettings.from_options(table_settings).to_dict()
        with self._mutex:
            self._check_namespace(parse_table_name(name).namespace)
            path = table_dir(name)
            if self.fs.exists(f"{path}/{TABLE_MANIFEST}"):
                raise TableExists(f"table {name} already exists under {self.fs.uri()}")
            bounds = [b""] + keys + [None]
            regions = [RegionInfo(f"{i:08d}", lo, hi) for i, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]
            manifest = TableManifest(name, fams, table_settings, regions, len(regions))
            tfs = self.fs.sub(path)
            tfs.makedirs("regions")
            lock = tfs.lock(TABLE_LOCK).acquire()
            try:
                manifest.save(tfs)
                table = Table(name, tfs, manifest, self.block_cache, self.read_only, lock)
            except BaseException:
                # A table that never opened leaves nothing behind: no manifest
                # that later opens would trip on, no held lock.
                lock.release()
                self.fs.delete_dir(path)
                raise
            self._tables[name] = table
            return table

    def delete_table(self, name: str | bytes, disable: bool = False) -> None:
        """Drop a table and its files (``disable`` is accepted for happybase compatibility)."""
        self._check_writable()
        name = validate_table_name(name)
        path = table_dir(name)
        with self._mutex:
            table = self._tables.pop(name, None)
            if table is not None and self.fs.is_local:
                # Scans still open read on from the files they leased: move the
                # table aside now (so the name is free at once) and delete it
                # when the last of them ends.
                trash = trash_name(path)
                try:
                    self.fs.rename(path, trash)
                except BaseException:
                    if not self.fs.exists(trash):  # not moved: the table stays open, whole
                        self._tables[name] = table
                        raise
                    # moved, but making the move durable failed: finish the delete, then report
                    table.close("was deleted", done=lambda: self.fs.delete_dir(trash))
                    raise
                try:
                    self.fs.delete(f"{trash}/{TABLE_MANIFEST}", missing_ok=True)
                finally:
                    table.close("was deleted", done=lambda: self.fs.delete_dir(trash))
                return
            if table is not None:
                table.close("was deleted")
            elif not self.fs.is_dir(path):
                raise TableNotFound(self.missing_table(name))
            # The table is not opened: a damaged or unreadable manifest (or none,
            # after a create that failed half-way) must not keep it from going.
            # Taking the writer lock keeps another writer's open table safe.
            with self.fs.sub(path).lock(TABLE_LOCK):
                self.fs.delete_dir(path)

    def table_values(self, name: str | bytes) -> dict:
        """The table's descriptor values (HBase's ``TableDescriptor.getValue``), read from its manifest."""
        from .descriptor import table_values

        name = validate_table_name(name)
        with self._mutex:
            table = self._tables.get(name)
            if table is not None and not table.closed:
                return table.values()
        return table_values(self.fs, name)

    def set_table_values(self, name: str | bytes, updates: dict) -> dict:
        """Set (None: remove) string descriptor values of a table (HBase's ``alter 't', METADATA => ...``).

        The manifest is rewritten atomically under the table's writer lock:
        through the table when this connection has it open, else the lock is
        taken for the change alone (TableLocked when another writer holds it).
        Returns the new values.
        """
        from .descriptor import set_table_values

        self._check_writable()
        name = validate_table_name(name)
        with self._mutex:
            table = self._tables.get(name)
            if table is not None and not table.closed:
                return table.set_values(updates)
            return set_table_values(self.fs, name, updates)

    def table(self, name: str | bytes) -> Table:
        """Open (once per connection) and return the named table."""
        name = validate_table_name(name)
        with self._mutex:
            table = self._tables.get(name)
            if table is None or table.closed:
                table = self._open(name)
                self._tables[name] = table
            return table

    def _open(self, name: str) -> Table:
        if self.closed:
            raise InvalidArgument("connection is closed")
        tfs = self.fs.sub(table_dir(name))
        if not tfs.exists(TABLE_MANIFEST):
            raise TableNotFound(self.missing_table(name))
        lock = None if self.read_only else tfs.lock(TABLE_LOCK).acquire()
        try:
            manifest = TableManifest.load(tfs)
            return Table(name, tfs, manifest, self.block_cache, self.read_only, lock)
        except BaseException:
            if lock is not None:
                lock.release()
            raise

    def missing_table(self, name: str | bytes) -> str:
        """One line saying why table ``name`` is not here: no root folder, no
        such namespace, or the tables there are (the closest names first)."""
        return missing_table(self.fs, validate_table_name(name))

    def _check_writable(self) -> None:
        if self.read_only:
            raise InvalidArgument(f"connection to {self.fs.uri()} is read-only")

    def close(self) -> None:
        """Close every open table (releasing their locks)."""
        with self._mutex:
            errors = []
            for table in self._tables.values():
                try:
                    table.close(f"is closed (its connection to {self.root} was closed)")
                except Exception as exc:  # the other tables still close and unlock
                    errors.append(exc)
            self._tables.clear()
            self.closed = True
        if errors:
            raise errors[0]

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def connect(root: str = "regionscan-data", **options: Any) -> Connection:
    """Open a connection to the tables under ``root`` (a path or pyarrow filesystem URI).

    ``grpc://host:port`` connects to a region server instead (``token=``).
    Options: ``read_only``, ``block_cache_size`` (bytes), ``cache_results`` (scans keep
    what they build in the block cache for the next scan of the same data unless they
    say ``cache_results=False``; default False: only scans that ask keep results),
    ``wal_sync``.
    """
    if isinstance(root, str) and root.startswith(("grpc://", "grpc+tcp://", "grpc+tls://")):
        from ..server.client import connect_remote  # the server client pulls in Flight

        return connect_remote(root, **options)
    return Connection(root, **options)
