"""A region's readable state as one immutable object: what a point read reads.

A :class:`RegionReadState` holds, per store, the family's settings, its open
store files (newest first) and whether its memstore held no cell when the
state was made.  The region makes a new one, under its write lock and the
lease lock, whenever any of that changes (:meth:`Region._publish`): when it
opens, when a flush or compaction swaps files, and when a write puts the first
cell into an empty memstore -- before that write completes, so before anyone
is told it succeeded.  A region that closes or goes offline publishes None.

A point read (:func:`state_get`) therefore takes no view, lock or lease: it
reads the state object it found on the region, and afterwards checks that the
region still holds that same object.  If it does, nothing was flushed,
compacted, split, closed or written into an empty memstore while it read, so
its answer is the region's at one instant.  If it does not, the read is thrown
away and done again on the new state (a file retired meanwhile may have been
closed under it: its error is thrown away too).  Store files of a state the
region still holds are never retired -- they are retired only after a swap,
which publishes first -- so the per-get lease the region views take is not
needed: the check after the read replaces it.

A store whose memstore holds cells is not read here (:func:`state_get`
returns None): the caller takes a region view at its read point, as scans do.
"""

from __future__ import annotations

from ..cells import LATEST_TIMESTAMP, Cell
from ..schema import FamilySettings
from ..storefile.point import file_row_dict, file_rows_dicts
from .reads import store_row

__all__ = ["RegionReadState", "StoreState", "state_get", "state_rows", "state_row_dict", "state_rows_dicts"]


class StoreState:
    """One store of a :class:`RegionReadState`: family, settings, files (newest first)
    and whether the memstore was empty when the state was made."""

    __slots__ = ("family", "settings", "files", "readers", "memstore_empty", "plain")

    def __init__(self, family: str, settings: FamilySettings, files: tuple, memstore_empty: bool):
        self.family = family.encode()
        self.settings = settings
        self.files = files
        self.readers = tuple(f.reader for f in files)
        self.memstore_empty = memstore_empty
        # one file that needs no version or delete resolution, and no TTL: its row's
        # cells are the answer as they are (filtered by the spec's columns and times)
        self.plain = (len(files) == 1 and not files[0].reader.info.needs_resolution
                      and settings.ttl is None)


class RegionReadState:
    """A region's stores as one immutable object, in family order (see the module docstring)."""

    __slots__ = ("info", "stores", "empty_families", "plain_readers")

    def __init__(self, info, stores: tuple[StoreState, ...]):
        self.info = info
        self.stores = stores
        # the families whose memstore is empty: a write into one of them publishes anew
        self.empty_families = frozenset(s.family for s in stores if s.memstore_empty)
        # the one file of each store, in family order, when every store is plain with an
        # empty memstore (its rows' dicts are read straight from the files); else None
        plain = all(s.plain and s.memstore_empty for s in stores)
        self.plain_readers = tuple(s.readers[0] for s in stores) if plain else None


def _plain_cells(cells: list[Cell], spec, family: bytes) -> list[Cell]:
    """The cells of a row read from one clean file that ``spec`` asks for."""
    lo, hi = spec.min_timestamp, spec.max_timestamp
    qualifiers = None if spec._families is None else spec._families[family]
    if qualifiers is None and lo == 0 and hi == LATEST_TIMESTAMP:
        return cells
    return [c for c in cells if (qualifiers is None or c[2] in qualifiers) and lo <= c[3] < hi]


def state_get(state: RegionReadState, row: bytes, spec) -> list[Cell] | None:
    """The visible cells of ``row`` from a clean state's store files, in cell order
    (what :func:`storage.region.reads.get_of` returns for a view); None when a
    wanted store's memstore holds cells (the caller reads a view instead)."""
    wanted = spec._families
    out: list[Cell] = []
    for store in state.stores:
        family = store.family
        if wanted is not None and family not in wanted:
            continue
        if not store.memstore_empty:
            return None
        if store.plain:
            cells = store.readers[0].row_cells(row)
            if cells:
                out.extend(_plain_cells(cells, spec, family))
            continue
        found = [(f, f.reader.row_cells(row)) for f in store.files]
        out.extend(store_row(store.settings, family, spec, (), found))
    return out


def _plain_reads(state: RegionReadState, read, arg) -> list | None:
    """``read(reader, arg)`` of each store's one file, in family order, when every
    store is plain with an empty memstore (``state.plain_readers``); None when one
    is not, or a read answers None (no compiled kernels): the caller reads cells."""
    readers = state.plain_readers
    if readers is None:
        return None
    out = []
    for reader in readers:
        got = read(reader, arg)
        if got is None:
            return None
        out.append(got)
    return out


def state_row_dict(state: RegionReadState, row: bytes, spec=None) -> dict | None:
    """``row`` as ``{b"family:qualifier": value}`` of every column at the newest
    time, each store answering by one compiled call
    (:func:`storage.storefile.point.file_row_dict`); None when a store cannot
    answer that way (a memstore with cells, several files or files that need
    resolution, a TTL, no compiled kernels): the caller reads the row's cells
    instead."""
    got = _plain_reads(state, file_row_dict, row)
    if not got:
        return None if got is None else {}
    out = got[0]  # a dict of this read's own
    for more in got[1:]:
        out.update(more)
    return out


def state_rows_dicts(state: RegionReadState, rows: list[bytes], spec=None) -> dict[bytes, dict] | None:
    """:func:`state_row_dict` of many rows (distinct, ascending), the rows without
    a cell left out, each store file searching for all of them with one compiled
    call per block (:func:`storage.storefile.point.file_rows_dicts`); None where a
    store cannot answer that way."""
    got = _plain_reads(state, file_rows_dicts, rows)
    if not got:
        return None if got is None else {}
    out = got[0]
    for more in got[1:]:
        for row, data in more.items():
            have = out.get(row)
            if have is None:
                out[row] = data
            else:
                have.update(data)
    return out


def state_rows(state: RegionReadState, rows: list[bytes], spec) -> dict[bytes, list[Cell]] | None:
    """:func:`state_get` of many rows (distinct, ascending): each store file looks all
    of them up in one pass (:meth:`StoreFileReader.rows_cells`); rows without a
    visible cell are left out.  None when a wanted store's memstore holds cells."""
    wanted = spec._families
    out: dict[bytes, list[Cell]] = {}
    for store in state.stores:
        family = store.family
        if wanted is not None and family not in wanted:
            continue
        if not store.memstore_empty:
            return None
        if store.plain:
            for row, cells in store.readers[0].rows_cells(rows).items():
                cells = _plain_cells(cells, spec, family)
                if cells:
                    got = out.get(row)
                    if got is None:
                        out[row] = cells  # a list of its own, made by this read
                    else:
                        got.extend(cells)
            continue
        per_file = [(f, f.reader.rows_cells(rows)) for f in store.files]
        present: set = set()
        for _, hits in per_file:
            present.update(hits)
        settings = store.settings
        for row in sorted(present):
            cells = store_row(settings, family, spec, (), [(f, hits.get(row, ())) for f, hits in per_file])
            if cells:
                out.setdefault(row, []).extend(cells)
    return out
