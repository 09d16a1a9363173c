"""WAL damage: a complete record that fails its checksum is never dropped as a torn
tail, only the damaged region goes offline, and ``regionscan wal check|repair``
reports the damage, sets the damaged log aside and keeps every intact record."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import storage
from jobs import cli
from storage import CorruptionError
from storage.region.wal_repair import check_table_wals
from storage.vfs.fs import FileSystem
from storage.wal.format import RECORD_HEADER_SIZE
from storage.wal.salvage import salvage_wal_bytes
from damaged_files import flip_byte


def _record_starts(path: Path) -> list[int]:
    """Offsets of the intact records of a WAL file."""
    return [a for a, _ in salvage_wal_bytes(path.read_bytes()).records]


def _wal_of(root: Path, region: str) -> Path:
    """The one non-empty WAL file of a region of table t."""
    (wal,) = [p for p in (root / "t" / "regions" / region / "wal").glob("*.wal") if p.stat().st_size > 16]
    return wal


def _three_regions(root: Path) -> None:
    """Table t: regions 00000000 [, g), 00000001 [g, p), 00000002 [p, ); 30 unflushed rows each, one record per put."""
    with storage.connect(str(root)) as c:
        t = c.create_table("t", {"cf": {}}, split_keys=[b"g", b"p"], settings={"wal_sync": "each"})
        for i in range(30):
            for prefix in (b"a", b"h", b"q"):
                t.put(prefix + b"%03d" % i, {b"cf:v": b"value-%d" % i})
        c.create_table("u", {"cf": {}}).put(b"x", {b"cf:v": b"1"})


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_bit_flip_in_the_last_record_of_100_acknowledged_rows_is_refused_then_repaired(tmp_path, capsys):
    """The old rule read a complete final record that failed its checksum as a
    torn write and dropped it: 100 acknowledged rows gone without a word."""
    root = tmp_path / "root"
    with storage.connect(str(root)) as c:
        t = c.create_table("t", {"cf": {}}, settings={"wal_sync": "each"})
        t.put(b"first", {b"cf:v": b"1"})
        with t.batch() as b:  # one record: 100 rows acknowledged together
            for i in range(100):
                b.put(b"row%03d" % i, {b"cf:v": b"v%d" % i})
        assert t.count() == 101
    wal = _wal_of(root, "00000000")
    last = _record_starts(wal)[-1]
    flip_byte(wal, last + RECORD_HEADER_SIZE + 40)
    original = wal.read_bytes()
    with storage.connect(str(root), read_only=True) as c:
        with pytest.raises(CorruptionError) as err:
            list(c.table("t").scan())
    message = str(err.value)
    assert wal.name in message and f"offset {last}" in message and "\n" not in message
    assert "offline" in message and "regionscan wal check" in message
    assert wal.read_bytes() == original  # the damaged log is left as it was

    code, out, _ = _run(capsys, "wal", "check", "t", "--root", str(root))
    assert code == 1
    assert f"offset {last}: record checksum mismatch" in out and "1 record of 100 cells in 100 rows lost" in out
    assert wal.read_bytes() == original  # check changes nothing

    code, out, _ = _run(capsys, "wal", "repair", "t", "--root", str(root))
    assert code == 0, out
    assert "1 record (100 cells in 100 rows) cannot be replayed" in out and "every region is online" in out
    aside = root / "t" / "corrupt" / "regions" / "00000000" / "wal" / wal.name
    assert aside.read_bytes() == original  # moved aside whole, not deleted
    with storage.connect(str(root)) as c:
        assert [k for k, _ in c.table("t").scan()] == [b"first"]  # the intact record is replayed
        c.table("t").put(b"after", {b"cf:v": b"2"})
    with storage.connect(str(root), read_only=True) as c:
        assert [k for k, _ in c.table("t").scan()] == [b"after", b"first"]


def test_damage_in_one_regions_wal_leaves_the_other_regions_and_tables_readable(tmp_path):
    """The old engine refused to open the whole table: every region unreadable."""
    root = tmp_path / "root"
    _three_regions(root)
    wal = _wal_of(root, "00000001")
    starts = _record_starts(wal)
    flip_byte(wal, starts[10] + RECORD_HEADER_SIZE + 20)  # a record in the middle
    for read_only in (True, False):
        with storage.connect(str(root), read_only=read_only) as c:
            t = c.table("t")
            assert len(list(t.scan(row_stop=b"g"))) == 30
            assert len(list(t.scan(row_start=b"p"))) == 30
            assert t.row(b"a001") == {b"cf:v": b"value-1"} and t.count(row_start=b"q") == 30
            for read in (lambda: list(t.scan()), lambda: t.row(b"h001"), lambda: t.count(),
                         lambda: list(t.scan_batches())):
                with pytest.raises(CorruptionError, match=f"region 00000001 of table t is offline: .*{wal.name}"):
                    read()
            assert set(t.offline_regions()) == {"00000001"}
            assert c.table("u").row(b"x") == {b"cf:v": b"1"}
            if not read_only:
                with pytest.raises(CorruptionError, match="offline"):
                    t.put(b"h999", {b"cf:v": b"lost?"})
                t.put(b"a999", {b"cf:v": b"kept"})  # the other regions still take writes
                t.flush()
                t.compact()  # and maintenance: the offline region's files are left alone
                with pytest.raises(CorruptionError, match="offline"):
                    t.split(b"k")
    assert _record_starts(wal) == [s for s in starts if s != starts[10]]  # nothing rewritten the log


def test_repair_keeps_every_record_after_the_damage_and_reports_what_was_lost(tmp_path, capsys):
    root = tmp_path / "root"
    _three_regions(root)
    wal = _wal_of(root, "00000001")
    starts = _record_starts(wal)
    flip_byte(wal, starts[5] + 3)  # the record's framing itself: the next record is found by its checksums
    code, out, _ = _run(capsys, "wal", "check", "t", "--root", str(root))
    assert code == 1 and "record header checksum mismatch" in out and "at least 1 record" in out
    code, out, _ = _run(capsys, "wal", "repair", "t", "--root", str(root))
    assert code == 0 and "at least 1 record cannot be replayed" in out
    with storage.connect(str(root), read_only=True) as c:
        rows = [k for k, _ in c.table("t").scan(row_start=b"g", row_stop=b"p")]
    assert rows == [b"h%03d" % i for i in range(30) if i != 5]  # records 6..29 after the damage are back
    assert not check_table_wals(FileSystem(str(root)).sub("t"), "t").damaged


def test_check_passes_a_clean_table_and_a_torn_tail(tmp_path, capsys):
    root = tmp_path / "root"
    _three_regions(root)
    wal = _wal_of(root, "00000002")
    with open(wal, "r+b") as f:
        f.truncate(wal.stat().st_size - 5)  # a crash cut the last append: not damage
    code, out, _ = _run(capsys, "wal", "check", "t", "--root", str(root))
    assert code == 0 and "a torn tail of" in out and "no damage" in out
    code, _, err = _run(capsys, "wal", "check", "tt", "--root", str(root))
    assert code == 1 and "did you mean t?" in err and err.count("\n") == 1


def test_repair_refuses_a_table_a_writer_has_open(tmp_path):
    """The repair rewrites logs: it takes the writer lock, so a writer process must not hold it."""
    root = tmp_path / "root"
    _three_regions(root)
    with storage.connect(str(root)) as c:
        c.table("t")  # holds the writer lock; the repair runs in another process
        done = subprocess.run([sys.executable, "-m", "jobs.cli", "wal", "repair", "t", "--root", str(root)],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "locked by another writer" in done.stderr
    assert done.stderr.count("\n") == 1


def test_salvage_finds_the_records_around_a_damaged_stretch(tmp_path):
    """A stretch of garbage in the middle: the records before and after it are kept."""
    root = tmp_path / "root"
    _three_regions(root)
    data = bytearray(_wal_of(root, "00000000").read_bytes())
    starts = [a for a, _ in salvage_wal_bytes(bytes(data)).records]
    data[starts[3] : starts[7]] = b"\xab" * (starts[7] - starts[3])
    found = salvage_wal_bytes(bytes(data))
    assert [a for a, _ in found.records] == starts[:3] + starts[7:]
    (damage,) = found.damage
    assert damage.offset == starts[3] and damage.length == starts[7] - starts[3]


def test_a_damaged_segment_of_a_wal_kept_as_objects_is_set_aside_and_its_records_kept(tmp_path):
    """On roots without append (object stores) a WAL is a directory of segment
    objects: a damaged one takes its region offline and the repair replaces it
    by a segment of its intact records, named by their sequence ids."""
    from storage.region.wal_repair import repair_table_wals
    from storage.vfs.faultfs import FaultFileSystem

    root = str(tmp_path / "root")

    def connect(**options):
        return storage.Connection(root, filesystem=FaultFileSystem(root, can_append=False), **options)

    with connect() as c:
        # policy none: the records gather into one segment, written on close
        t = c.create_table("t", {"cf": {}}, split_keys=[b"m"], settings={"wal_sync": "none"})
        for i in range(8):
            t.put(b"z%d" % i, {b"cf:v": b"%d" % i})
        t.put(b"a", {b"cf:v": b"other region"})
    (victim,) = (tmp_path / "root" / "t" / "regions" / "00000001" / "wal").glob("*.wal/*.seg")
    starts = [a for a, _ in salvage_wal_bytes(victim.read_bytes()).records]
    assert len(starts) == 8
    flip_byte(victim, starts[-1] + RECORD_HEADER_SIZE + 2)  # the last record: the kept ones end one id earlier
    original = victim.read_bytes()
    with connect(read_only=True) as c:
        t = c.table("t")
        assert t.row(b"a") == {b"cf:v": b"other region"}
        with pytest.raises(CorruptionError, match=victim.name):
            t.row(b"z0")
    report = repair_table_wals(FaultFileSystem(root, can_append=False).sub("t"), "t")
    assert [f.path.rsplit("/", 1)[-1] for f in report.damaged] == [victim.name]
    assert report.lost()[0] == 1 and not victim.exists()
    (renamed,) = victim.parent.glob("*.seg")
    assert renamed.name < victim.name
    aside = tmp_path / "root" / "t" / "corrupt" / victim.relative_to(tmp_path / "root" / "t")
    assert aside.read_bytes() == original
    with connect(read_only=True) as c:
        rows = [k for k, _ in c.table("t").scan()]
    assert rows == [b"a"] + [b"z%d" % i for i in range(7)]
