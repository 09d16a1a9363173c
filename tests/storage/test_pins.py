"""Pinned files are archived, not deleted, while a live pin names them."""

from __future__ import annotations

import storage
from storage.region.pins import ARCHIVE_DIR, clean_archive, live_pins, release_pin, write_pin


def _table(tmp_path):
    conn = storage.connect(str(tmp_path / "root"))
    t = conn.create_table("t", {"cf": {}}, split_keys=[b"m"])
    for i in range(20):
        t.put(b"%s%02d" % (b"a" if i % 2 else b"x", i), {b"cf:q": b"v%d" % i})
    t.flush()
    return conn, t


def _file_paths(t) -> list[str]:
    return [
        f"regions/{r.info.region_id}/{name}/{f.name}"
        for r in t._regions
        for name, s in r.stores.items()
        for f in s.files
    ]


def test_compaction_and_split_archive_pinned_files_until_the_pin_goes(tmp_path):
    conn, t = _table(tmp_path)
    fs = t.fs
    pinned = _file_paths(t)
    pin = write_pin(fs, pinned, [], ttl_seconds=600)
    assert live_pins(fs)[0]["files"] == pinned
    t.put(b"b00", {b"cf:q": b"new"})
    t.compact()  # the pinned inputs are retired
    for path in pinned:
        assert not fs.exists(path) and fs.exists(f"{ARCHIVE_DIR}/{path}")
    t.split(b"c")  # the parent region's directory goes; its pinned files were archived already
    assert clean_archive(fs) == 0  # still pinned
    release_pin(fs, pin)
    assert clean_archive(fs) == len(pinned)
    assert dict(t.scan())[b"b00"] == {b"cf:q": b"new"}
    conn.close()


def test_an_expired_pin_protects_nothing(tmp_path):
    conn, t = _table(tmp_path)
    fs = t.fs
    pinned = _file_paths(t)
    write_pin(fs, pinned, [], ttl_seconds=-1)  # already expired (a reader that died)
    assert live_pins(fs) == []
    t.compact()
    for path in pinned:
        assert not fs.exists(path) and not fs.exists(f"{ARCHIVE_DIR}/{path}")
    conn.close()


def test_split_archives_the_pinned_files_of_the_parent(tmp_path):
    conn, t = _table(tmp_path)
    fs = t.fs
    pinned = _file_paths(t)
    parent = t._region_for(b"c").info.region_id
    parent_files = [p for p in pinned if p.startswith(f"regions/{parent}/")]
    other_files = [p for p in pinned if p not in parent_files]
    assert parent_files and other_files
    pin = write_pin(fs, pinned, [], ttl_seconds=600)
    t.split(b"c")
    assert all(fs.exists(f"{ARCHIVE_DIR}/{p}") and not fs.exists(p) for p in parent_files)
    assert all(fs.exists(p) and not fs.exists(f"{ARCHIVE_DIR}/{p}") for p in other_files)
    release_pin(fs, pin)
    conn.close()
    with storage.connect(str(tmp_path / "root")) as again:  # a writer's open cleans the archive
        again.table("t")
    assert not any(fs.exists(f"{ARCHIVE_DIR}/{p}") for p in pinned)


def test_a_pin_is_written_whole_without_fsync_and_committed_files_still_are(tmp_path, monkeypatch):
    """A pin protects files for readers that an operating-system crash ends too, so it is written
    atomically (a reader sees none or all of it) but not fsynced: every scan's planning writes
    one.  A durable write (the default) still fsyncs the file and its directory."""
    import os

    conn, t = _table(tmp_path)
    fs = t.fs
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    pinned = _file_paths(t)
    pin = write_pin(fs, pinned, ["wal/1.log"], ttl_seconds=600)
    assert synced == []
    assert [(d["files"], d["wal"]) for d in live_pins(fs)] == [(pinned, ["wal/1.log"])]
    assert not [n for n in fs.listdir("pins") if not n.endswith(".pin")]  # no temporary file left
    release_pin(fs, pin)
    assert live_pins(fs) == []
    fs.write_atomic("kept.json", b"{}")
    assert len(synced) == 2 and fs.read_bytes("kept.json") == b"{}"
    conn.close()


def test_shared_pins_of_the_same_files_are_one_pin_while_most_of_its_life_is_left(tmp_path):
    """A reader that never releases its pin (a Spark read) plans again and again over an
    unchanged table: with ``shared`` each plan of the same files gets the pin an earlier one
    wrote, so the pins folder holds one pin per table state, not one per query.  Other files,
    a pin whose file went, or a pin with less than 90% of a new pin's life left get a new one."""
    from storage import clock

    conn, t = _table(tmp_path)
    fs = t.fs
    pinned = _file_paths(t)
    with clock.use(clock.ManualClock()) as manual:
        first = write_pin(fs, pinned, [], ttl_seconds=1000, shared=True)
        assert [write_pin(fs, pinned, [], ttl_seconds=1000, shared=True) for _ in range(5)] == [first] * 5
        assert len(fs.listdir("pins")) == 1
        assert write_pin(fs, pinned, [], ttl_seconds=1000) != first  # not shared: a pin of its own
        other = write_pin(fs, pinned[:1], [], ttl_seconds=1000, shared=True)
        assert other != first
        manual.advance(99)  # 901 s of 1000 left: still reused
        assert write_pin(fs, pinned, [], ttl_seconds=1000, shared=True) == first
        manual.advance(2)  # 899 s left: a reader could be left with less than 90% of its time
        renewed = write_pin(fs, pinned, [], ttl_seconds=1000, shared=True)
        assert renewed != first and write_pin(fs, pinned, [], ttl_seconds=1000, shared=True) == renewed
        release_pin(fs, renewed)  # its file gone (a dropped table's pins go with it): a new pin
        again = write_pin(fs, pinned, [], ttl_seconds=1000, shared=True)
        assert again not in (first, renewed) and fs.exists(f"pins/{again}.pin")
        assert {tuple(d["files"]) for d in live_pins(fs)} == {tuple(pinned), tuple(pinned[:1])}
    conn.close()
