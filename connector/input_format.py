"""TableInputFormat: HBase's MapReduce input format, for regionscan tables.

Configure it with the keys HBase MapReduce users know (see
:mod:`connector.options`) plus ``regionscan.root``::

    fmt = TableInputFormat({
        "regionscan.root": "/data/tables",
        "hbase.mapreduce.inputtable": "events",
        "hbase.mapreduce.scan.columns": "cf:a cf:b",
        "hbase.mapreduce.scan.row.start": "user1",
    })
    for split in fmt.get_splits():
        reader = fmt.create_record_reader(split)
        while reader.next_key_value():
            key, value = reader.get_current_key(), reader.get_current_value()
        reader.close()
    fmt.release()

``get_splits()`` pins every region's manifest (files, generation, WAL) at
that moment: the splits read that snapshot whatever is flushed, compacted
or bulk-loaded later, or fail with :class:`~storage.region.region_snapshots.SnapshotLost`
naming a pinned file that was deleted meanwhile.
"""

from __future__ import annotations

import socket
from dataclasses import replace
from typing import Any, Mapping, Sequence
from urllib.parse import urlparse

from storage import InvalidArgument, TableNotFound
from storage.engine import (
    FileSystem,
    missing_table,
    no_such_family,
    parse_column,
    pin_table,
    release_pin_file,
    table_dir,
    table_exists,
    validate_table_name,
    write_pin_file,
)
from storage.keys import KeyRange, intersect

from .options import (
    AUTOBALANCE,
    AVERAGE_REGION_SIZE,
    INPUT_TABLE,
    MAX_RESTARTS,
    PIN_REGISTER,
    PIN_SHARED,
    PIN_TTL,
    ROOT,
    SPLITS_PER_REGION,
    ScanSpec,
    conf_bool,
    conf_int,
    normalize_conf,
    scan_spec_from_conf,
)
from .record_reader import TableBatchRecordReader, TableRecordReader
from .scanning import is_remote_root
from .splits import TableSplit, plan_splits

__all__ = ["TableInputFormat", "REMOTE_TOKEN"]

REMOTE_TOKEN = "regionscan.token"


def _location(root: str) -> str:
    """Where a root's data lives, for split locations: the URI's host, or this host for local paths."""
    if "://" in root:
        parsed = urlparse(root)
        if parsed.netloc:
            return parsed.netloc
    return socket.gethostname()


class TableInputFormat:
    """Splits a regionscan table into :class:`TableSplit` s and reads them.

    ``conf`` is a mapping of configuration keys (Hadoop or hbase-spark
    names, any case).  ``key_ranges`` restricts the scan further (sorted,
    disjoint ``[start, stop)`` row ranges, e.g. from filter pushdown).
    """

    def __init__(self, conf: Mapping[str, Any] | None = None, key_ranges: Sequence[KeyRange] | None = None):
        self.conf: dict[str, Any] = {}
        self.key_ranges = None if key_ranges is None else tuple(key_ranges)
        self._pin_ids: list[str] = []
        self.set_conf(conf or {})

    # -- configuration ------------------------------------------------------
    def set_conf(self, conf: Mapping[str, Any]) -> None:
        """Replace the configuration (validated now, so mistakes surface on the driver)."""
        conf = normalize_conf(conf)
        table = conf.get(INPUT_TABLE)
        if not table:
            raise InvalidArgument(f"{INPUT_TABLE} (the table name) is not set")
        validate_table_name(table)
        if not conf.get(ROOT):
            raise InvalidArgument(f"{ROOT} (where the tables live: a path, a URI or grpc://host:port) is not set")
        self.conf = conf
        self.scan_spec()  # parse every scan key once here

    def get_conf(self) -> dict[str, Any]:
        """A copy of the (normalized) configuration."""
        return dict(self.conf)

    @property
    def table_name(self) -> str:
        """The table to read."""
        return str(self.conf[INPUT_TABLE])

    @property
    def root(self) -> str:
        """Where the tables live."""
        return str(self.conf[ROOT])

    def scan_spec(self) -> ScanSpec:
        """The scan the configuration describes (plus this format's key ranges)."""
        spec = scan_spec_from_conf(self.conf)
        if self.key_ranges is not None:
            spec = spec.with_ranges(self.key_ranges)
        return spec

    def _remote_options(self) -> dict[str, Any]:
        token = self.conf.get(REMOTE_TOKEN)
        return {"token": token} if token else {}

    # -- splits ---------------------------------------------------------------
    def get_splits(self, context: Any = None) -> list[TableSplit]:
        """One split per region that intersects the scan (refined by the split settings).

        In files mode the regions are pinned now; call :meth:`release` when
        every reader is done so the pins stop holding files.
        """
        scan = self.scan_spec()
        splits_per_region = conf_int(self.conf, SPLITS_PER_REGION, 1, minimum=1)
        autobalance = conf_bool(self.conf, AUTOBALANCE, False)
        target = conf_int(self.conf, AVERAGE_REGION_SIZE, minimum=1)
        if is_remote_root(self.root):
            return self._remote_splits(scan, splits_per_region, autobalance, target)
        table_fs = FileSystem(self.root).sub(table_dir(self.table_name))
        if not table_exists(table_fs):
            raise TableNotFound(missing_table(FileSystem(self.root), self.table_name, self.root))
        snapshot = self._pin(table_fs, scan.spans())
        self._check_columns(scan, snapshot.families)
        regions = [(f"{self.table_name},{p.info.name}", p, p.start, p.end, p.size) for p in snapshot.regions]
        splits = plan_splits(
            self.table_name, self.root, _location(self.root), regions, scan, table_fs,
            splits_per_region, autobalance, target, snapshot.families,
        )
        ttl = conf_int(self.conf, PIN_TTL, 24 * 3600, minimum=1)
        register = splits and conf_bool(self.conf, PIN_REGISTER, True)
        shared = conf_bool(self.conf, PIN_SHARED, False)
        pin_id = write_pin_file(table_fs, [p for s in splits for p in s.regions], ttl, shared) if register else None
        if pin_id is not None:
            if not shared:  # a shared pin may protect other readers' files too: it expires, never released
                self._pin_ids.append(pin_id)
            splits = [_with_pin(s, pin_id) for s in splits]
        return splits

    def _pin(self, table_fs: FileSystem, spans: Sequence[KeyRange]) -> Any:
        """The regions the scan's ``spans`` reach, pinned now (:func:`pin_table`'s snapshot)."""
        return pin_table(table_fs, lambda info: bool(intersect(spans, [(info.start, info.end)])))

    def _remote_splits(self, scan: ScanSpec, per_region: int, autobalance: bool, target: int | None) -> list[TableSplit]:
        import storage

        conn = storage.connect(self.root, **self._remote_options())
        try:
            table = conn.table(self.table_name)
            families = {k.decode() if isinstance(k, bytes) else k: v for k, v in table.families().items()}
            self._check_columns(scan, families)
            regions = [
                (r["name"].decode() if isinstance(r["name"], bytes) else r["name"], None,
                 r["start_key"], r["end_key"] or None, int(r.get("size", 0)))
                for r in table.regions()
            ]
        finally:
            conn.close()
        # without files there are no block indexes to cut at: one split per region
        return plan_splits(self.table_name, self.root, _location(self.root), regions, scan,
                           None, 1, autobalance, target, families)

    def _check_columns(self, scan: ScanSpec, families: Mapping[str, Any]) -> None:
        for column in scan.request.columns or ():
            family = parse_column(column)[0]
            if family.decode("ascii", "replace") not in families:
                raise InvalidArgument(f"scan column {column!r}: {no_such_family(self.table_name, family, families)}")

    # -- readers --------------------------------------------------------------
    def _max_restarts(self) -> int:
        return conf_int(self.conf, MAX_RESTARTS, 3, minimum=0)

    def create_record_reader(self, split: TableSplit | None = None, context: Any = None) -> TableRecordReader:
        """A row reader; initialized on ``split`` when one is given."""
        reader = TableRecordReader(self._max_restarts(), self._remote_options())
        if split is not None:
            reader.initialize(split, context)
        return reader

    def create_batch_reader(self, split: TableSplit | None = None, context: Any = None) -> TableBatchRecordReader:
        """An Arrow batch reader; initialized on ``split`` when one is given."""
        reader = TableBatchRecordReader(self._max_restarts(), self._remote_options())
        if split is not None:
            reader.initialize(split, context)
        return reader

    def release(self) -> None:
        """Drop the pins the splits registered (their files may be deleted from now on)."""
        if is_remote_root(self.root):
            return
        table_fs = FileSystem(self.root).sub(table_dir(self.table_name))
        for pin_id in self._pin_ids:
            release_pin_file(table_fs, pin_id)
        self._pin_ids = []


def _with_pin(split: TableSplit, pin_id: str) -> TableSplit:
    return replace(split, pin_id=pin_id)
