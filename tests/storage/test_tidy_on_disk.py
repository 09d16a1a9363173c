"""What a table leaves on disk: no empty WAL per open, no pin of a killed reader.

A WAL file (or, on an object store, a WAL's folder of segments) is made by its first record,
so opening and closing a table, or flushing it with no write after, adds none for replay and
pinned reads to open.  A pin records the process that wrote it; once that process is gone the
pin protects nothing and the next registration or release in the table deletes it, while a
live process's pin (also one whose pid a dead owner once had) stays.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import storage
import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
from storage.engine import pin_table
from storage.region.pins import PINS_DIR, live_pins, own_identity, owner_gone, release_pin, write_pin
from storage.vfs.faultfs import FaultFileSystem
from storage.vfs.fs import FileSystem
from storage.wal.reader import WalReader
from storage.wal.segments import SegmentWalWriter


def _wal_files(root: str) -> list[str]:
    table = FileSystem(root).sub("t")
    return [
        f"{region}/{name}"
        for region in table.listdir("regions")
        for name in table.listdir(f"regions/{region}/wal")
    ]


# -- no empty WAL per open ---------------------------------------------------------------------


def test_opening_a_table_again_and_again_makes_no_wal_file(tmp_path):
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {}}, split_keys=[b"m"])
    for _ in range(3):
        with storage.connect(root) as conn:
            conn.table("t").scan()
    assert _wal_files(root) == []
    with storage.connect(root) as conn:
        t = conn.table("t")
        t.put(b"a", {b"cf:q": b"1"})
        assert len(_wal_files(root)) == 1  # the written region's, made by its first record
        snapshot = pin_table(t.fs)
        assert [len(p.wal_files) for p in snapshot.regions] == [1, 0]
        t.flush()  # the flushed WAL is retired; the next one waits for a write
        assert _wal_files(root) == []
        t.put(b"x", {b"cf:q": b"2"})
    with storage.connect(root) as conn:  # the unflushed write is replayed, then flushed
        t = conn.table("t")
        assert dict(t.scan()) == {b"a": {b"cf:q": b"1"}, b"x": {b"cf:q": b"2"}}
        t.flush()
    with storage.connect(root) as conn:
        assert len(dict(conn.table("t").scan())) == 2
    assert _wal_files(root) == []


@pytest.mark.parametrize("policy", ["each", "none"])
def test_a_segmented_wal_is_listed_from_its_first_segment(tmp_path, policy):
    fs = FaultFileSystem(str(tmp_path), can_append=False)
    writer = SegmentWalWriter(fs, "wal/1.wal", policy)
    writer.sync()
    writer.close()
    assert fs.listdir("wal") == []
    writer = SegmentWalWriter(fs, "wal/2.wal", policy)
    writer.append(5, [(b"r", b"cf", b"q", 1, 4, b"v")])
    writer.close()
    assert fs.listdir("wal") == ["2.wal"]
    assert [r.seq_id for r in WalReader(fs, "wal/2.wal")] == [5]


# -- pins of killed readers --------------------------------------------------------------------

_HOLDER = """
import sys
from storage.region.pins import write_pin
from storage.vfs.fs import FileSystem
fs = FileSystem(sys.argv[1])
print(write_pin(fs, ["regions/r/cf/1.sf"], [], 600), flush=True)
print(write_pin(fs, ["regions/r/cf/2.sf"], [], 600, shared=True), flush=True)
sys.stdin.read()
"""


def _start_holder(table_dir: str) -> tuple[subprocess.Popen, list[str]]:
    env = dict(os.environ, PYTHONPATH=str(paths.REPO))
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, table_dir], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, text=True)
    return proc, [proc.stdout.readline().strip(), proc.stdout.readline().strip()]


def _pin_names(fs: FileSystem) -> set[str]:
    return {n[: -len(".pin")] for n in fs.listdir(PINS_DIR)}


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "zombie"])
def test_the_pins_of_a_killed_process_go_at_the_next_pin_or_release(tmp_path, reaped):
    fs = FileSystem(str(tmp_path / "t"))
    fs.makedirs("")
    proc, theirs = _start_holder(fs.local_path(""))
    try:
        mine = write_pin(fs, ["regions/r/cf/3.sf"], [], 600)
        assert _pin_names(fs) == {*theirs, mine}  # a live process's pins stay
        assert len(live_pins(fs)) == 3
        docs = [json.loads(fs.read_bytes(f"{PINS_DIR}/{p}.pin")) for p in theirs]
        assert all(d["owner"]["pid"] == proc.pid for d in docs)
        assert not owner_gone(docs[0]["owner"])
    finally:
        proc.send_signal(signal.SIGKILL)
        if reaped:
            proc.wait()
    try:
        if not reaped:  # killed, not yet waited for: a zombie is no reader either
            deadline = time.monotonic() + 10
            while open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                assert time.monotonic() < deadline, "the killed process did not end"
                time.sleep(0.005)
        assert [d["files"] for d in live_pins(fs)] == [["regions/r/cf/3.sf"]]
        assert _pin_names(fs) == {*theirs, mine}  # reading pins deletes nothing
        if reaped:  # a release sweeps as a registration does
            release_pin(fs, mine)
            assert _pin_names(fs) == set()
        else:
            again = write_pin(fs, ["regions/r/cf/4.sf"], [], 600)
            assert _pin_names(fs) == {mine, again}
    finally:
        proc.wait()
        proc.stdout.close()
        proc.stdin.close()


def test_a_pid_is_judged_with_its_start_time_host_and_boot(tmp_path):
    me = own_identity()
    assert me is not None and me["pid"] == os.getpid()
    assert not owner_gone(me)
    parent = os.getppid()  # alive, with its own start time
    with open(f"/proc/{parent}/stat") as f:
        parent_start = int(f.read().rsplit(")", 1)[1].split()[19])
    assert not owner_gone(dict(me, pid=parent, start=parent_start))
    # the same pids, started at other times: processes that ended, whose pids were reused
    assert owner_gone(dict(me, pid=parent, start=parent_start + 1))
    assert owner_gone(dict(me, start=me["start"] - 1))
    # not judged here: another host, boot or pid namespace, or a record that is not one
    for other in ({"host": me["host"] + "x"}, {"boot": "another"}, {"pidns": "pid:[1]"}):
        assert not owner_gone(dict(me, start=me["start"] - 1, **other))
    for bad in (None, "1234", {}, dict(me, pid="1"), dict(me, pid=0), dict(me, start=None)):
        assert not owner_gone(bad)
    # a pin naming a dead owner on disk (a pid reused by a live process) goes at the next pin
    fs = FileSystem(str(tmp_path / "t"))
    fs.makedirs(PINS_DIR)
    dead = {"expires_ms": 9_999_999_999_999, "files": ["f"], "wal": [],
            "owner": dict(me, pid=parent, start=parent_start + 1)}
    fs.write_bytes(f"{PINS_DIR}/9999999999999-deadbeef0000.pin", json.dumps(dead).encode())
    old = dict(dead, files=["g"])
    del old["owner"]  # a pin without an owner lasts until it expires
    fs.write_bytes(f"{PINS_DIR}/9999999999999-0ld000000000.pin", json.dumps(old).encode())
    assert [d["files"] for d in live_pins(fs)] == [["g"]]
    pin = write_pin(fs, ["h"], [], 600)
    assert _pin_names(fs) == {"9999999999999-0ld000000000", pin}
