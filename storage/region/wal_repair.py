"""Checking and repairing the WALs of a table's regions (``regionscan wal check|repair``).

A region whose WAL holds a damaged record does not open (it stays offline,
:meth:`storage.region.region.Region.open`); the rest of the table reads on.
This module is the way back, in the manner of HBase's ``hbck`` and
``WALPlayer``:

* :func:`check_table_wals` reads every WAL file (or segment object) of every
  region with :func:`storage.wal.salvage.salvage_wal_bytes` and reports the
  damage, the torn tails and the records that are intact.  It changes nothing.
* :func:`repair_table_wals` sets each damaged file aside, whole, under
  ``<table>/corrupt/regions/<region>/wal/<name>`` (moved out of the region,
  never deleted: it is the evidence and the last copy of the damaged
  records), and puts in its place a log of every record that still passes its
  checksums, in the original order.  The region then opens and replays them.

The caller of :func:`repair_table_wals` holds the table's writer lock, so no
writer appends to a log being repaired.  Each step is crash-safe: the copy is
durable before the log is replaced (``write_atomic``), so a crash leaves the
damaged log in place (repair again) or the repaired one with its copy aside.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..vfs.fs import FileSystem
from ..wal.reader import segment_last_seq, segment_name, segment_names
from ..wal.salvage import WalDamage, WalSalvage, counted, salvage_wal_bytes
from .manifest import TableManifest

__all__ = ["CORRUPT_DIR", "WalFileReport", "TableWalReport", "check_table_wals", "repair_table_wals"]

CORRUPT_DIR = "corrupt"
"""Where repaired WAL files are set aside, under the table directory (as HBase's ``corrupt`` folder)."""

_WAL_DIR = "wal"


@dataclass
class WalFileReport:
    """One WAL file (or segment object) of one region and what a salvage found in it."""

    region_id: str
    path: str  # relative to the table directory
    uri: str
    salvage: WalSalvage
    segment: bool = False
    set_aside: str | None = None  # where the damaged file went (a URI), once repaired

    @property
    def damage(self) -> list[WalDamage]:
        """The damaged stretches; in a segment a torn tail or missing records count too
        (segments are written whole)."""
        damage = list(self.salvage.damage)
        if self.segment and self.salvage.torn_tail_bytes:
            start = self.salvage.size - self.salvage.torn_tail_bytes
            damage.append(WalDamage(start, self.salvage.torn_tail_bytes, "segment ends in a cut record", None))
        if self.segment and not damage:
            promised = segment_last_seq(self.path.rsplit("/", 1)[-1])
            last = self.salvage.seq_ids[-1] if self.salvage.seq_ids else None
            if promised is not None and last != promised:
                damage.append(WalDamage(self.salvage.size, 0, f"segment ends at sequence id {last}, its name "
                                        f"promises {promised}", None))
        return damage

    def describe(self) -> list[str]:
        """Lines for a person: the file's state, then one line per damaged stretch."""
        s = self.salvage
        kept = f"{counted(len(s.records), 'intact record')} ({counted(s.cells, 'cell')})"
        if not self.damage:
            torn = f", a torn tail of {s.torn_tail_bytes} bytes (dropped on replay)" if s.torn_tail_bytes else ""
            return [f"ok       region {self.region_id} {self.uri}: {kept}{torn}"]
        lines = [f"DAMAGED  region {self.region_id} {self.uri}: {kept}"]
        lines += [f"         {d.describe()}" for d in self.damage]
        if self.set_aside:
            lines.append(f"         repaired: the damaged file is kept at {self.set_aside}; "
                         f"the log now holds the {len(s.records)} intact records")
        return lines


@dataclass
class TableWalReport:
    """Every WAL file of a table's regions, checked (and repaired, when asked)."""

    table: str
    files: list[WalFileReport]

    @property
    def damaged(self) -> list[WalFileReport]:
        """The files replay refuses (or refused, before a repair)."""
        return [f for f in self.files if f.damage]

    def lost(self) -> tuple[int, bool, int | None, int | None]:
        """Records lost, whether that is a lower bound, and the cells and rows lost
        where every damaged record still shows them (else None)."""
        records, lower_bound, cells, rows = 0, False, 0, 0
        for report in self.damaged:
            for d in report.damage:
                if d.records is None:
                    records, lower_bound = records + 1, True
                else:
                    records += d.records
                if d.cells is None or cells is None:
                    cells = None
                else:
                    cells += d.cells
                if d.rows is None or rows is None:
                    rows = None
                else:
                    rows += d.rows
        return records, lower_bound, cells, rows

    def summary(self) -> str:
        """One line: how many files, how many damaged, what was lost."""
        bad = self.damaged
        if not bad:
            return f"table {self.table}: {len(self.files)} WAL files, no damage"
        records, lower_bound, cells, rows = self.lost()
        lost = f"{'at least ' if lower_bound else ''}{counted(records, 'record')}"
        if cells is not None:
            lost += f" ({counted(cells, 'cell')}" + (f" in {counted(rows, 'row')})" if rows is not None else ")")
        regions = sorted({f.region_id for f in bad})
        return (f"table {self.table}: {len(bad)} of {len(self.files)} WAL files damaged "
                f"(region{'s' if len(regions) != 1 else ''} {', '.join(regions)}); {lost} cannot be replayed")


def _wal_units(table_fs: FileSystem, region_id: str) -> list[tuple[str, bool]]:
    """(path relative to the table, is a segment) of every WAL file or segment of a region."""
    rfs = table_fs.sub(f"regions/{region_id}")
    if not rfs.exists(_WAL_DIR):
        return []
    units = []
    for name in sorted(n for n in rfs.listdir(_WAL_DIR) if n.endswith(".wal")):
        path = f"{_WAL_DIR}/{name}"
        if not rfs.can_append and rfs.is_dir(path):
            units += [(f"regions/{region_id}/{path}/{seg}", True) for seg in segment_names(rfs, path)]
        else:
            units.append((f"regions/{region_id}/{path}", False))
    return units


def check_table_wals(table_fs: FileSystem, table: str) -> TableWalReport:
    """Salvage-read every WAL of every region of the table under ``table_fs``; change nothing."""
    manifest = TableManifest.load(table_fs)
    files = []
    for info in manifest.regions:
        for path, segment in _wal_units(table_fs, info.region_id):
            salvage = salvage_wal_bytes(table_fs.read_bytes(path))
            files.append(WalFileReport(info.region_id, path, table_fs.uri(path), salvage, segment))
    return TableWalReport(table, files)


def _aside_path(table_fs: FileSystem, path: str) -> str:
    """A free name under :data:`CORRUPT_DIR` for the damaged file ``path``."""
    base = f"{CORRUPT_DIR}/{path}"
    candidate, n = base, 0
    while table_fs.exists(candidate):
        n += 1
        candidate = f"{base}.{n}"
    return candidate


def repair_table_wals(table_fs: FileSystem, table: str) -> TableWalReport:
    """Set every damaged WAL file aside and replace it by its intact records.

    The caller holds the table's writer lock.  Returns the report of
    :func:`check_table_wals`, with ``set_aside`` filled in for each file
    repaired.  Files without damage (a torn tail included: replay drops it)
    are left alone.
    """
    report = check_table_wals(table_fs, table)
    for unit in report.damaged:
        data = table_fs.read_bytes(unit.path)
        aside = _aside_path(table_fs, unit.path)
        folder = aside.rsplit("/", 1)[0]
        table_fs.makedirs(folder)
        table_fs.write_bytes(aside, data)  # durable, name and bytes, before the damaged log is replaced
        table_fs.sync_dir(folder)
        kept = unit.salvage.salvaged_bytes(data)
        if not unit.segment:
            table_fs.write_atomic(unit.path, kept)
        else:
            # a segment is named by its first and last sequence ids: the kept records get their own name
            folder = unit.path.rsplit("/", 1)[0]
            renamed = None
            if unit.salvage.seq_ids:
                renamed = f"{folder}/{segment_name(unit.salvage.seq_ids[0], unit.salvage.seq_ids[-1])}"
                table_fs.write_bytes(renamed, kept)
            if renamed != unit.path:
                table_fs.delete(unit.path, missing_ok=True)
        unit.set_aside = table_fs.uri(aside)
    return report

