"""A dropped table that scans still read is moved aside under its held lock; a
writable connection deletes the trash folders of processes that died."""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import os
import signal
import subprocess
import sys
import textwrap

import storage

ROOT_DIR = str(paths.REPO)

# A child that drops a table in the middle of a scan, says where the trash
# went, and waits to be killed with the scan still open.
CHILD = textwrap.dedent(
    """
    import os, struct, sys, time
    import storage
    conn = storage.connect(sys.argv[1], block_cache_size=0)
    t = conn.create_table("gone", {"cf": {"block_size": 256}}, settings={"wal_sync": "none"})
    with t.batch() as b:
        for i in range(500):
            b.put(struct.pack(">I", i), {b"cf:x": b"v%d" % i})
    t.flush()
    scan = t.scan_batches(columns=[b"cf:x"], batch_size=16)
    next(scan)
    conn.delete_table("gone")
    trash = [n for n in os.listdir(sys.argv[1]) if n.startswith(".deleted-")]
    print("TRASH", *trash, flush=True)
    time.sleep(600)
    """
)


def _trash(root: str) -> list[str]:
    return sorted(n for n in os.listdir(root) if n.startswith(".deleted-"))


def _fill(table, rows: int) -> None:
    with table.batch() as b:
        for i in range(rows):
            b.put(b"%06d" % i, {b"cf:x": b"v%d" % i})


def test_the_trash_of_a_killed_process_goes_with_the_next_writable_connection(tmp_path):
    root = str(tmp_path / "root")
    keep = storage.connect(root)
    _fill(keep.create_table("kept", {"cf": {}}), 50)
    keep.close()
    env = {**os.environ, "PYTHONPATH": ROOT_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen([sys.executable, "-c", CHILD, root], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = child.stdout.readline().split()
        assert line[0] == "TRASH" and len(line) == 2, line
        trash = line[1]
        # While its process lives and its scan is open, the trash is left alone
        # by other writers' connections and by readers.
        other = storage.connect(root)
        assert _trash(root) == [trash]
        assert other.tables() == [b"kept"]
        other.close()
        storage.connect(root, read_only=True).close()
        assert _trash(root) == [trash]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        child.stdout.close()
    assert _trash(root) == [trash]  # the dead process's scan never ended
    storage.connect(root, read_only=True).close()
    assert _trash(root) == [trash]  # a reader deletes nothing
    after = storage.connect(root)
    assert _trash(root) == []
    assert [len(list(after.table("kept").scan()))] == [50]  # other tables untouched
    after.close()


def test_a_connection_in_the_same_process_leaves_the_trash_of_an_open_scan(tmp_path):
    root = str(tmp_path / "root")
    conn = storage.connect(root, block_cache_size=0)
    table = conn.create_table("t", {"cf": {"block_size": 256}}, settings={"wal_sync": "none"})
    _fill(table, 400)
    table.flush()
    scan = table.scan_batches(columns=[b"cf:x"], batch_size=16)
    first = next(scan)
    conn.delete_table("t")
    assert len(_trash(root)) == 1
    storage.connect(root).close()  # its lock is held by this process's dropped table
    assert len(_trash(root)) == 1
    rows = first.num_rows + sum(b.num_rows for b in scan)
    assert rows == 400  # the scan read its files to the end
    assert _trash(root) == []  # and the last scan's end deleted the trash
    conn.close()
