"""Pinned region snapshots: what a split reads, fixed at ``get_splits()`` time.

A :class:`RegionPin` records a region's manifest as it was when the splits
were made: its generation, its store files per family, its flushed sequence
id, its WAL files and the highest sequence id in them.  A reader opens
exactly those files read-only and decodes exactly those WAL records
(``flushed_seq_id < seq <= max_seq_id``) straight into one sorted Arrow
run of cells (:class:`storage.memstore.sorted_cells.SortedCells`), so a
flush, compaction or bulk load that happens later does not change what the
split returns.

A file that has gone since (compacted or split away and deleted) is looked
for under the table's archive (``archive/regions/<region>/<family>/<file>``,
where an engine that defers deletion for pinned snapshots moves it);
if it is not there either, :class:`SnapshotLost` names it.

Pins can be registered in ``<table>/pins/<expiry ms>-<id>.pin`` (JSON: expiry
and the pinned paths) so that the engine can defer deleting those files until the
readers are done or the pin expires; see docs/connector.md.  The connector's splits and record
readers read through these; the engine keeps them beside the pins and manifests
they read.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import Callable, Iterable

from ..cells import EMPTY_CELLS
from ..errors import InvalidArgument, StorageError
from ..memstore.sorted_cells import SortedCells
from ..schema import FamilySettings
from ..storefile import BlockCache, StoreFileReader
from ..vfs.fs import FileSystem
from ..wal.reader import WalReader
from . import reader_cache
from .load_journal import apply_entry, read_journals
from .manifest import REGION_MANIFEST, RegionInfo, RegionManifest, TableManifest
from .pins import ARCHIVE_DIR, PINS_DIR, live_pins, release_pin, write_pin
from .replay_memo import kept_replay
from .store import StoreFile, StoreView
from .view import RegionView

__all__ = [
    "ARCHIVE_DIR",
    "PINS_DIR",
    "SnapshotLost",
    "RegionPin",
    "TableSnapshot",
    "pin_table",
    "PinnedRegion",
    "write_pin_file",
    "release_pin_file",
    "live_pins",
    "shared_block_cache",
    "scan_keeps_blocks",
    "BIG_SCAN_SHARE",
    "parse_cache_size",
    "BLOCK_CACHE_SIZE_ENV",
    "CACHE_RESULTS_ENV",
    "DEFAULT_BLOCK_CACHE_SIZE",
]

_WAL_DIR = "wal"
_PIN_RETRIES = 5


class SnapshotLost(StorageError):
    """A file a split pinned is gone (compacted, split or flushed away since ``get_splits()``)."""


@dataclass(frozen=True)
class RegionPin:
    """One region as of ``get_splits()``: key range, manifest generation, files and WAL."""

    region_id: str
    start: bytes
    end: bytes | None
    generation: int
    flushed_seq_id: int
    files: tuple[tuple[str, tuple[str, ...]], ...]  # (family, names oldest first)
    wal_files: tuple[str, ...]
    max_seq_id: int
    size: int
    staged: tuple[tuple[str, str, str], ...] = ()  # (family, name, staged path) of a committed bulk load

    @property
    def info(self) -> RegionInfo:
        """The pinned region's id and key range."""
        return RegionInfo(self.region_id, self.start, self.end)

    def file_paths(self) -> list[str]:
        """Store file paths relative to the table directory."""
        return [f"regions/{self.region_id}/{fam}/{name}" for fam, names in self.files for name in names]

    def wal_paths(self) -> list[str]:
        """Pinned WAL paths relative to the table directory."""
        return [f"regions/{self.region_id}/{_WAL_DIR}/{name}" for name in self.wal_files]


@dataclass(frozen=True)
class TableSnapshot:
    """A table's families and its pinned regions in key order."""

    name: str
    families: dict[str, dict]
    regions: tuple[RegionPin, ...]
    table_generation: int

    def family_settings(self) -> dict[str, FamilySettings]:
        """The families' settings as the engine's :class:`FamilySettings`."""
        return {name: FamilySettings(**opts) for name, opts in self.families.items()}


def _wal_state(rfs: FileSystem) -> tuple[tuple[str, ...], int, int]:
    """WAL file names, the highest sequence id in them (0 if none) and their total bytes."""
    names = tuple(n for n in rfs.listdir(_WAL_DIR) if n.endswith(".wal"))
    max_seq = 0
    size = 0
    for name in names:
        reader = WalReader(rfs, f"{_WAL_DIR}/{name}", decode=False)  # checks records, skips decoding
        for record in reader:
            if record.seq_id > max_seq:
                max_seq = record.seq_id
        size += reader.valid_length or 0
    return names, max_seq, size


def _load_region_manifest(rfs: FileSystem, region_id: str) -> RegionManifest:
    if rfs.exists(REGION_MANIFEST):
        return RegionManifest.load(rfs)
    return RegionManifest(region_id)


def _pin_region(table_fs: FileSystem, info: RegionInfo, journals) -> RegionPin:
    rfs = table_fs.sub(f"regions/{info.region_id}")
    for _ in range(_PIN_RETRIES):
        manifest = _load_region_manifest(rfs, info.region_id)
        try:
            wal_names, wal_max, wal_bytes = _wal_state(rfs)
        except FileNotFoundError:
            continue  # a flush rolled the WAL while we read it: pin again
        # A flush between reading the manifest and the WAL would pair old
        # files with a new WAL; the generation tells, and we pin again.
        if _load_region_manifest(rfs, info.region_id).generation != manifest.generation:
            continue
        staged: list[tuple[str, str, str]] = []
        for journal in journals:
            entry = journal.regions.get(info.region_id)
            if entry is not None:
                manifest = apply_entry(manifest, journal.mode, entry)
                staged.extend(entry.moves)  # files the commit may not have moved into place yet
        files = tuple((fam, tuple(names)) for fam, names in sorted(manifest.files.items()) if names)
        size = wal_bytes
        for fam, names in files:
            for name in names:
                try:
                    size += rfs.size(f"{fam}/{name}")
                except FileNotFoundError:
                    pass  # replaced or not moved in yet: the reader finds it or reports it
        flushed = manifest.flushed_seq_id
        return RegionPin(
            info.region_id, info.start, info.end, manifest.generation, flushed, files,
            wal_names, max(wal_max, flushed), size, tuple(staged),
        )
    raise StorageError(
        f"region {info.region_id} of {table_fs.uri()} kept changing while it was pinned "
        f"({_PIN_RETRIES} tries); is a writer flushing continuously?"
    )


def pin_table(table_fs: FileSystem, wanted: Callable[[RegionInfo], bool] | None = None) -> TableSnapshot:
    """Pin the regions of the table under ``table_fs`` (committed bulk-load journals applied).

    ``wanted`` picks the regions to pin (default: all); the others are left out.
    """
    manifest = TableManifest.load(table_fs)
    journals = read_journals(table_fs)
    pins = tuple(
        _pin_region(table_fs, info, journals) for info in manifest.regions if wanted is None or wanted(info)
    )
    return TableSnapshot(manifest.name, dict(manifest.families), pins, manifest.generation)


_cache_lock = threading.Lock()
_caches: dict[str, BlockCache] = {}

#: the environment variable that sizes the process's shared block cache (bytes, or with a
#: k/m/g suffix); the JVM source sets it for its engine worker from
#: ``spark.regionscan.worker.blockCacheSize``
BLOCK_CACHE_SIZE_ENV = "REGIONSCAN_BLOCK_CACHE_SIZE"
DEFAULT_BLOCK_CACHE_SIZE = 64 << 20
#: the environment variable that makes reads which do not say keep their results in the
#: process's block cache (``true``/``false``, default false; storage/storefile/cache_memo.py);
#: the JVM source sets it for its engine worker from ``spark.regionscan.worker.cacheResults``
CACHE_RESULTS_ENV = "REGIONSCAN_CACHE_RESULTS"
_SIZE_SUFFIXES = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}


def parse_cache_size(text: str, what: str = BLOCK_CACHE_SIZE_ENV) -> int:
    """Bytes from ``text``: a non-negative integer with an optional k/m/g suffix (``512m``)."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    factor = _SIZE_SUFFIXES.get(match.group(2).lower()) if match else None
    if match is None or factor is None:
        raise InvalidArgument(f"{what} must be a size in bytes such as 536870912 or 512m, got {text!r}")
    return int(match.group(1)) * factor


def _env_cache_results() -> bool:
    text = os.environ.get(CACHE_RESULTS_ENV, "").strip().lower()
    if text in ("", "false", "0", "no"):
        return False
    if text in ("true", "1", "yes"):
        return True
    raise InvalidArgument(f"{CACHE_RESULTS_ENV} must be true or false, got {os.environ[CACHE_RESULTS_ENV]!r}")


def _process_cache(env: str, default: int) -> BlockCache:
    """The process's one cache sized by ``env`` (else ``default``) at first use, keeping
    results for reads that do not say as :data:`CACHE_RESULTS_ENV` says."""
    with _cache_lock:
        cache = _caches.get(env)
        if cache is None:
            text = os.environ.get(env)
            size = parse_cache_size(text, env) if text else default
            cache = _caches[env] = BlockCache(size, cache_results=_env_cache_results())
        return cache


def shared_block_cache() -> BlockCache:
    """One block cache per process, shared by readers that cache blocks.

    Sized at first use by ``REGIONSCAN_BLOCK_CACHE_SIZE`` if set, else
    :data:`DEFAULT_BLOCK_CACHE_SIZE`; its default for reads that do not say whether they keep
    results is ``REGIONSCAN_CACHE_RESULTS`` (false when unset).
    """
    return _process_cache(BLOCK_CACHE_SIZE_ENV, DEFAULT_BLOCK_CACHE_SIZE)


BIG_SCAN_SHARE = 0.25
"""The share of the process's block cache a scan's store files may take and still cache their
blocks: a quarter, as HBase's LruBlockCache gives blocks read once (its single-access share)."""


def scan_keeps_blocks(read_bytes: int) -> bool:
    """Whether a scan of about ``read_bytes`` bytes of store files should keep its blocks in the
    process's block cache (:func:`shared_block_cache`): not when they are more than
    :data:`BIG_SCAN_SHARE` of it.

    HBase leaves big scans out of the block cache (``Scan.setCacheBlocks(false)``, what its
    MapReduce jobs set): cached, a scan larger than the cache evicts everything others keep
    there, then its own blocks one by one, in LRU order, before it reads them again, so each
    run of it finds none and pays the insertions and evictions on top of its reads.  Read
    uncached, its blocks come from the files (the OS page cache) and are dropped with the
    batches built from them: the cache keeps its working set, and the scan's memory is its
    batches in flight."""
    return read_bytes <= shared_block_cache().capacity_bytes * BIG_SCAN_SHARE


class PinnedRegion:
    """The open files of one pinned region; :meth:`view` is what a scan reads.  Call :meth:`close`."""

    def __init__(self, table_fs: FileSystem, table_name: str, pin: RegionPin,
                 families: dict[str, FamilySettings], cache: BlockCache | None = None,
                 cache_results: bool | None = None):
        # cache_results: keep the decoded WAL records for the next read of this pin (the
        # read's scan option; None: the block cache's default), storage/region/replay_memo.py
        self.pin = pin
        self._readers: list[StoreFileReader] = []
        try:
            stores = {}
            unflushed = self._replay(table_fs, pin, cache, cache_results)
            pinned = dict(pin.files)
            for name, settings in families.items():
                files = []
                for file_name in reversed(pinned.get(name, ())):  # the view wants newest first
                    reader = self._open(table_fs, pin, name, file_name, cache)
                    files.append(StoreFile(file_name, reader))
                stores[name] = StoreView(name, settings, unflushed.family(name.encode()), tuple(files))
            self.view = RegionView(pin.info, stores, table_name)
        except BaseException:
            self.close()
            raise

    def _open(self, table_fs: FileSystem, pin: RegionPin, family: str, name: str, cache) -> StoreFileReader:
        live = f"regions/{pin.region_id}/{family}/{name}"
        candidates = [live] + [path for fam, n, path in pin.staged if fam == family and n == name]
        candidates.append(f"{ARCHIVE_DIR}/{live}")
        # twice: a file may move from its staged path to its live path between two looks
        for path in candidates * 2:
            try:
                # a reader of the unchanged file kept by an earlier read, else a fresh one;
                # a path that is gone raises here, whatever was kept of it
                reader = reader_cache.checkout(table_fs, path, cache)
            except FileNotFoundError:
                continue
            self._readers.append(reader)
            return reader
        raise SnapshotLost(
            f"store file {table_fs.uri(live)} pinned at region {pin.region_id} manifest generation "
            f"{pin.generation} is gone (compacted, split or bulk-overwritten after get_splits()); "
            "plan the read again"
        )

    @staticmethod
    def _replay(table_fs: FileSystem, pin: RegionPin, cache: BlockCache | None,
                cache_results: bool | None) -> SortedCells:
        """The pinned WAL records' cells, decoded straight into Arrow and sorted
        once, or kept from an earlier read of the same records
        (:mod:`storage.region.replay_memo`)."""
        if pin.max_seq_id <= pin.flushed_seq_id:
            return SortedCells(EMPTY_CELLS)  # nothing unflushed was pinned
        rfs = table_fs.sub(f"regions/{pin.region_id}")
        wal = []  # (filesystem, path) of each pinned WAL file: live, or archived since
        for name in pin.wal_files:
            path = f"{_WAL_DIR}/{name}"
            if rfs.exists(path):
                wal.append((rfs, path))
                continue
            archived = table_fs.sub(f"{ARCHIVE_DIR}/regions/{pin.region_id}")
            if not archived.exists(path):
                raise SnapshotLost(
                    f"WAL {rfs.uri(path)} pinned at region {pin.region_id} manifest generation "
                    f"{pin.generation} is gone (its edits were flushed after get_splits()); "
                    "plan the read again"
                )
            wal.append((archived, path))

        def decode() -> SortedCells:
            payloads = []
            for fs, path in wal:
                try:
                    # checksummed records, decoded below all at once
                    records = list(WalReader(fs, path, decode="payload"))
                except FileNotFoundError:
                    raise SnapshotLost(f"WAL {fs.uri(path)} pinned at region {pin.region_id} vanished while read") from None
                payloads += [r.cells for r in records if pin.flushed_seq_id < r.seq_id <= pin.max_seq_id]
            return SortedCells.from_payloads(payloads, rfs.uri(_WAL_DIR))

        # a read that caches no blocks but keeps results keeps the decoded WAL in the
        # process's block cache: one budget for blocks and kept results
        kept_in = cache if cache is not None else shared_block_cache()
        return kept_replay(wal, (pin.flushed_seq_id, pin.max_seq_id), kept_in, decode, cache_results)

    def close(self, discard: bool = False) -> None:
        """Give the pinned files' readers back to the process's reader cache
        (:mod:`storage.region.reader_cache`), which keeps them open for the next
        read of the same files; ``discard``: the read failed, so none of them is
        served again.  Safe to call twice."""
        readers, self._readers = self._readers, []
        for reader in readers:
            reader_cache.release(reader, discard)

    def __enter__(self) -> "PinnedRegion":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # A read that raised may have raised in one of the readers (a corrupt
        # block): do not hand them out again.  A consumer that stopped early
        # (GeneratorExit) or an interrupt says nothing against them.
        self.close(discard=exc_type is not None and issubclass(exc_type, Exception))


def write_pin_file(table_fs: FileSystem, regions: Iterable[RegionPin], ttl_seconds: int,
                   shared: bool = False) -> str | None:
    """Register the pinned regions' files (see :mod:`storage.region.pins`); returns the pin id,
    or None if the root is not writable.  ``shared``: a pin the caller never releases, which
    may be one this process registered before for the same files (``pins.write_pin``)."""
    paths: list[str] = []
    wal: list[str] = []
    for pin in regions:
        paths.extend(pin.file_paths())
        wal.extend(pin.wal_paths())
    return write_pin(table_fs, paths, wal, ttl_seconds, shared)


release_pin_file = release_pin
