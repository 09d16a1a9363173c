"""Damaged files under a table make reads raise CorruptionError, never return wrong data."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import storage
from storage import CorruptionError
from damaged_files import flip_byte


def _make(root: Path) -> None:
    with storage.connect(str(root)) as c:
        t = c.create_table("t", {"cf": {"block_size": 512}}, split_keys=[b"m"])
        for i in range(400):
            t.put(b"%s%04d" % (b"a" if i % 2 else b"x", i), {b"cf:v": b"value-%d" % i})
        t.flush()
        t.put(b"b-unflushed", {b"cf:v": b"in the wal"})


def _read_all(root: Path) -> list:
    with storage.connect(str(root)) as c:
        return list(c.table("t").scan())


def _table_manifest(root: Path) -> Path:
    return root / "t" / "TABLE.manifest"


def _first_region_manifest(root: Path) -> Path:
    (manifest,) = [p for p in (root / "t" / "regions").glob("*/REGION.manifest") if "00000000" in str(p)]
    return manifest


@pytest.mark.parametrize("locate, name", [(_table_manifest, "TABLE.manifest"), (_first_region_manifest, "REGION.manifest")])
def test_flipped_manifest_byte(tmp_path, locate, name):
    root = tmp_path / "root"
    _make(root)
    manifest = locate(root)
    for offset in random.Random(1).sample(range(manifest.stat().st_size), 12):
        original = manifest.read_bytes()
        flip_byte(manifest, offset)
        with pytest.raises(CorruptionError, match=name):
            _read_all(root)
        manifest.write_bytes(original)
    assert len(_read_all(root)) == 401


def test_damaged_store_files_raise(tmp_path):
    root = tmp_path / "root"
    _make(root)
    files = sorted((root / "t" / "regions").glob("*/cf/*.sf"))
    assert files
    rng = random.Random(3)
    for path in files:
        original = path.read_bytes()
        for offset in rng.sample(range(len(original)), 25):
            flip_byte(path, offset)
            with pytest.raises(CorruptionError):
                _read_all(root)
            path.write_bytes(original)
        for cut in (len(original) - 1, len(original) // 2, 10):
            path.write_bytes(original[:cut])
            with pytest.raises(CorruptionError):
                _read_all(root)
            path.write_bytes(original)
    assert len(_read_all(root)) == 401


def test_bad_wal_record_before_the_tail_raises_with_file_and_offset(tmp_path):
    root = tmp_path / "root"
    with storage.connect(str(root)) as c:
        t = c.create_table("t", {"cf": {}}, settings={"wal_sync": "each"})
        for i in range(10):
            t.put(b"r%d" % i, {b"cf:v": b"x" * 50})
    (wal,) = [p for p in (root / "t" / "regions").glob("*/wal/*.wal") if p.stat().st_size > 0]
    size = wal.stat().st_size
    flip_byte(wal, size // 2)
    with pytest.raises(CorruptionError) as err:
        _read_all(root)
    assert str(wal.name) in str(err.value) and "offset" in str(err.value)
    # the damaged log is left as it was for inspection, not rewritten
    assert wal.stat().st_size == size


def test_torn_wal_tail_is_dropped(tmp_path):
    root = tmp_path / "root"
    with storage.connect(str(root)) as c:
        t = c.create_table("t", {"cf": {}}, settings={"wal_sync": "each"})
        for i in range(10):
            t.put(b"r%d" % i, {b"cf:v": b"x" * 50})
    (wal,) = [p for p in (root / "t" / "regions").glob("*/wal/*.wal") if p.stat().st_size > 0]
    with open(wal, "r+b") as f:
        f.truncate(wal.stat().st_size - 7)  # the last append was cut short by a crash
    rows = _read_all(root)
    assert [k for k, _ in rows] == [b"r%d" % i for i in range(9)]
    # and the table stays writable and readable across another reopen
    with storage.connect(str(root)) as c:
        c.table("t").put(b"r9", {b"cf:v": b"again"})
    assert len(_read_all(root)) == 10


def test_an_open_never_appends_to_a_torn_log_left_in_the_same_millisecond(tmp_path):
    """An open starts a new log named by the next sequence id, or by that id and
    the clock's millisecond when a log has that name. A failed open in the same
    millisecond can leave a torn log under the second name too; the next open
    then takes a third name instead of appending behind the torn record."""
    from storage import clock
    from storage.wal.format import HEADER_BYTES

    root = tmp_path / "root"
    with clock.use(clock.ManualClock(now_ms=1_700_000_000_000)):  # every open in the same millisecond
        with storage.connect(str(root)) as c:
            c.create_table("t", {"cf": {}}, settings={"wal_sync": "each"})
        (region,) = (root / "t" / "regions").iterdir()
        wal = region / "wal" / f"{1:020d}.wal"  # the name the next open gives its log (made by its first write)
        for log in (wal, wal.with_name(wal.stem + "-1700000000000.wal")):
            log.write_bytes(HEADER_BYTES + b"\x00" * 8)  # as a write cut short by a full disk leaves it
        assert _read_all(root) == []
        with storage.connect(str(root)) as c:
            c.table("t").put(b"s", {b"cf:v": b"y"})
        assert [k for k, _ in _read_all(root)] == [b"s"]


def test_a_region_with_a_damaged_store_file_stays_offline_and_keeps_its_files(tmp_path, capsys):
    """A writer that opens a table whose region has a damaged store file opens
    the other regions and changes nothing of the damaged one: once the file's
    bytes are back, every row is there."""
    root = tmp_path / "root"
    _make(root)
    (sf,) = (root / "t" / "regions" / "00000001" / "cf").glob("*.sf")
    original = sf.read_bytes()
    flip_byte(sf, len(original) - 20)  # the trailer: found while the region opens
    from jobs import cli

    assert cli.main(["wal", "check", "t", "--root", str(root)]) == 1  # the WALs are fine, the region is not
    out = capsys.readouterr().out
    assert "no damage" in out and "region 00000001 of table t is offline: trailer" in out
    assert sf.name in out
    with storage.connect(str(root)) as c:
        t = c.table("t")
        assert len(list(t.scan(row_stop=b"m"))) == 201  # region 00000000 holds the a-rows and the unflushed one
        with pytest.raises(CorruptionError, match=f"region 00000001 of table t is offline: .*{sf.name}"):
            list(t.scan(row_start=b"m"))
        t.put(b"a-new", {b"cf:v": b"written meanwhile"})
        t.flush()
        t.compact()
    assert sf.exists() and sf.read_bytes() != original  # neither deleted as an orphan nor rewritten
    sf.write_bytes(original)
    assert len(_read_all(root)) == 402
