"""Crash safety: a writer killed with SIGKILL at random moments loses no acknowledged write.

The child (tests/crash_writer.py) makes acknowledged writes while flushing,
compacting and splitting; the parent kills it at a random moment, reopens
the table, checks every invariant and finds every acknowledged write.

The kill trials of one table run one after the other (each reopens what the kills before it
left), but the tables of different tests have nothing in common: the module's ``chains``
fixture runs the chains of trials of the tests selected side by side, each in a thread of its
own, and each test checks its chain's outcome.  A writer spends its life waiting on fsync, so
the chains overlap their waits instead of adding them up.
"""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

import storage
from storage.region.load_journal import JOURNAL_DIR
from storage.region.manifest import REGION_MANIFEST, RegionManifest, TableManifest
from storage.table.trash import TRASH_PREFIX
from storage.vfs.fs import TEMP_MARK, FileSystem
from killed_writer import run_and_kill, write_number

TRIALS = int(os.environ.get("REGIONSCAN_FAULT_TRIALS", "2"))
"""Kills per maintenance operation below (CI sets more through .ci/run)."""

REPO = paths.REPO

EXTRA_TRIALS = 4
"""Kills a chain adds, one at a time, while none of its kills so far landed inside the operation
it tests (a kill between two operations checks only what the random-moment chain checks)."""


def _trials(inside: list[bool], base: int) -> Iterator[int]:
    """The trial numbers of a chain: ``base`` of them, then more (at most :data:`EXTRA_TRIALS`)
    while no kill has landed inside its operation; ``inside`` grows as the trials run."""
    trial = 0
    while trial < base or (not any(inside) and trial < base + EXTRA_TRIALS):
        yield trial
        trial += 1


class Chains:
    """Chains of kill trials running side by side, one thread each, started by name."""

    def __init__(self) -> None:
        self._threads: dict[str, threading.Thread] = {}
        self._outcomes: dict[str, tuple[bool, object]] = {}

    def start(self, name: str, run, *args) -> None:
        def body() -> None:
            try:
                self._outcomes[name] = (True, run(*args))
            except BaseException as exc:  # an assertion of a trial: raised again in the test
                self._outcomes[name] = (False, exc)

        thread = threading.Thread(target=body, name=f"kill chain {name}")
        self._threads[name] = thread
        thread.start()

    def result(self, name: str):
        """The chain's return value once it has ended; what it raised, raised here."""
        self._threads[name].join()
        ok, value = self._outcomes[name]
        if not ok:
            raise value
        return value

    def join(self) -> None:
        for thread in self._threads.values():
            thread.join()


def _random_moments(root: str) -> None:
    rng = random.Random(20261129)
    expected: dict[bytes, bytes] = {}
    trials = 12
    for trial in range(trials):
        acked = run_and_kill(root, seed=trial, kill_after=rng.uniform(0.05, 1.5))
        expected.update(acked)
        conn = storage.connect(root)
        table = conn.table("crash")
        table.check()
        stored = {row: data[b"cf:v"] for row, data in table.scan()}
        missing = [r for r in expected if r not in stored]
        assert not missing, f"trial {trial}: {len(missing)} acknowledged rows lost, e.g. {missing[:3]}"
        # A write that was durable but not yet acknowledged when the kill came
        # may legitimately replace an acknowledged value: it must be newer.
        wrong = [r for r, v in expected.items() if write_number(stored[r]) < write_number(v)]
        assert not wrong, f"trial {trial}: rows with older values than acknowledged {wrong[:3]}"
        conn.close()
    assert len(expected) > 200  # the trials really wrote something


def _whole_batches(root: str) -> None:
    rng = random.Random(20261201)
    acked: dict[bytes, int] = {}
    for trial in range(6):
        acked.update(run_and_kill(root, seed=trial, kill_after=rng.uniform(0.3, 2.0), mode="batches"))
        conn = storage.connect(root)
        table = conn.table("crash")
        table.check()
        seen: dict[bytes, set[int]] = {}
        counts: dict[bytes, int] = {}
        for row, _ in table.scan(row_stop=b"C"):
            name, i, _, count = row.rsplit(b"-", 3)
            seen.setdefault(name, set()).add(int(i))
            counts[name] = int(count)
        torn = [n for n, got in seen.items() if len(got) != counts[n]]
        assert not torn, f"trial {trial}: batches kept in part: {torn[:3]}"
        lost = [n for n, c in acked.items() if len(seen.get(n, ())) != c]
        assert not lost, f"trial {trial}: acknowledged batches lost: {lost[:3]}"
        conn.close()
    assert len(acked) > 20


def _leftovers(root: str) -> list[str]:
    """Files of the table that no manifest names and the engine does not keep
    (temporary files, orphan store files, retired regions, journals, trash)."""
    fs = FileSystem(root)
    tfs = fs.sub("crash")
    left = [name for name in fs.listdir("") if name.startswith(TRASH_PREFIX) or TEMP_MARK in name]
    left += [f"{JOURNAL_DIR}/{n}" for n in tfs.listdir(JOURNAL_DIR) if not n.startswith(".")]
    live = {info.region_id for info in TableManifest.load(tfs).regions}
    for entry in tfs.listdir(""):
        if TEMP_MARK in entry:
            left.append(entry)
    for region_id in tfs.listdir("regions"):
        if region_id not in live:
            left.append(f"regions/{region_id}")
            continue
        rfs = tfs.sub(f"regions/{region_id}")
        manifest = RegionManifest.load(rfs)
        for entry in rfs.listdir(""):
            if TEMP_MARK in entry:
                left.append(f"regions/{region_id}/{entry}")
            elif rfs.is_dir(entry) and entry != "wal":
                named = set(manifest.files.get(entry, []))
                left += [f"regions/{region_id}/{entry}/{n}" for n in rfs.listdir(entry) if n not in named]
            elif entry not in (REGION_MANIFEST, "wal"):
                left.append(f"regions/{region_id}/{entry}")
    return left


def _maintenance(root: str, op: str) -> list[bool]:
    rng = random.Random(f"{op}-20261205")
    expected: dict[bytes, bytes] = {}
    inside: list[bool] = []
    for trial in _trials(inside, TRIALS):
        expected.update(run_and_kill(root, seed=trial, kill_after=rng.uniform(0.2, 2.5), mode=op, inside=inside))
        conn = storage.connect(root)
        table = conn.table("crash")
        table.check()
        stored = {row: data[b"cf:v"] for row, data in table.scan()}
        missing = [r for r in expected if r not in stored]
        assert not missing, f"{op} trial {trial}: {len(missing)} acknowledged rows lost, e.g. {missing[:3]}"
        wrong = [r for r, v in expected.items() if write_number(stored[r]) < write_number(v)]
        assert not wrong, f"{op} trial {trial}: rows with older values than acknowledged {wrong[:3]}"
        left = _leftovers(root)
        assert not left, f"{op} trial {trial}: leftovers after reopening: {left[:5]}"
        if op == "flush":
            # the flushing writer never compacts (so that its kills land in flushes): without
            # this its files would pile up over the trials, and every later reopen, check and
            # scan (the writer's and this test's) would read them all again
            table.compact()
        conn.close()
    assert len(expected) > 100
    assert any(inside), f"{op}: none of {len(inside)} kills landed inside the operation"
    return inside


def _bulk_loads(root: str) -> list[bool]:
    rng = random.Random(20261205)
    acked: dict[bytes, int] = {}
    inside: list[bool] = []
    for trial in _trials(inside, TRIALS + 1):
        acked.update(run_and_kill(root, seed=trial, kill_after=rng.uniform(0.2, 3.0), mode="bulkload",
                                  inside=inside))
        conn = storage.connect(root)  # a writer open rolls a cut-short commit forward
        table = conn.table("crash")
        table.check()
        seen: dict[bytes, set[int]] = {}
        counts: dict[bytes, int] = {}
        for row, _ in table.scan():
            name, i, _, count = row.rsplit(b"-", 3)
            seen.setdefault(name, set()).add(int(i))
            counts[name] = int(count)
        torn = [n for n, got in seen.items() if len(got) != counts[n]]
        assert not torn, f"trial {trial}: bulk loads kept in part: {torn[:3]}"
        lost = [n for n, c in acked.items() if len(seen.get(n, ())) != c]
        assert not lost, f"trial {trial}: committed bulk loads lost: {lost[:3]}"
        left = _leftovers(root)
        assert not left, f"trial {trial}: leftovers after reopening: {left[:5]}"
        conn.close()
    assert acked, "no bulk load was committed before the kills"
    assert any(inside), f"bulk load: none of {len(inside)} kills landed inside a commit"
    return inside


MAINTENANCE = ("flush", "compact", "split")

CHAINS = {
    "random": ("test_sigkill_at_random_moments_loses_no_acknowledged_write", _random_moments, ()),
    "batches": ("test_sigkill_keeps_each_batch_whole_or_not_at_all", _whole_batches, ()),
    **{op: ("test_sigkill_during_maintenance_loses_nothing_and_leaves_nothing", _maintenance, (op,))
       for op in MAINTENANCE},
    "bulkload": ("test_sigkill_during_bulk_load_commits_keeps_each_load_whole_or_absent", _bulk_loads, ()),
}
"""Chain name: (the test that checks it, the chain, its arguments after the root)."""


@pytest.fixture(scope="module")
def chains(request, tmp_path_factory):
    """The chains of the tests of this module selected in this run, started side by side."""
    wanted = set()
    for item in request.session.items:
        if item.module is not request.module:
            continue
        op = getattr(item, "callspec", None) and item.callspec.params.get("op")
        wanted.update(name for name, (test, _, args) in CHAINS.items()
                      if test == item.originalname and (not args or args[0] == op))
    running = Chains()
    try:
        for name in sorted(wanted):
            _, run, args = CHAINS[name]
            running.start(name, run, str(tmp_path_factory.mktemp(f"kills-{name}") / "root"), *args)
        yield running
    finally:
        running.join()


def test_sigkill_at_random_moments_loses_no_acknowledged_write(chains):
    chains.result("random")


def test_sigkill_keeps_each_batch_whole_or_not_at_all(chains):
    """Batches of up to 600 rows from three threads (one WAL record each, syncs
    shared): after a kill every acknowledged batch is there in full, and any
    batch with a row on disk has all of its rows."""
    chains.result("batches")


@pytest.mark.parametrize("op", MAINTENANCE)
def test_sigkill_during_maintenance_loses_nothing_and_leaves_nothing(chains, op):
    """SIGKILL while the writer flushes, compacts or splits back to back: after
    reopening, every acknowledged row is there, every store file passes its
    checks, and no leftover of the killed operation remains."""
    inside = chains.result(op)
    print(f"{op}: {sum(inside)} of {len(inside)} kills landed inside the operation")


def test_sigkill_during_bulk_load_commits_keeps_each_load_whole_or_absent(chains):
    inside = chains.result("bulkload")
    print(f"bulk load: {sum(inside)} of {len(inside)} kills landed inside a commit")


@pytest.mark.spark
def test_a_second_writer_and_an_import_job_are_refused_in_one_line_while_a_writer_runs(spark, tmp_path, capsys):
    """A writer process holds the table (writing, flushing, compacting, splitting):
    another process's open and an ``import`` job are refused with TableLocked in
    one line, and change nothing; once the writer is gone the import goes in."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jobs import import_

    root = str(tmp_path / "root")
    inputs = tmp_path / "cells"
    inputs.mkdir()
    rows = [b"import%03d" % i for i in range(50)]
    pq.write_table(pa.table({
        "row": pa.array(rows, pa.binary()), "family": pa.array([b"cf"] * 50, pa.binary()),
        "qualifier": pa.array([b"v"] * 50, pa.binary()), "timestamp": pa.array([7] * 50, pa.int64()),
        "value": pa.array([b"i0.0-"] * 50, pa.binary()),
    }), inputs / "part-0.parquet")
    seen: dict[str, str] = {}

    def second_writers(pid: int) -> None:
        code = ("import storage, sys\n"
                f"try:\n    storage.connect({root!r}).table('crash')\n"
                "except storage.TableLocked as e:\n    print(e); sys.exit(3)\n")
        other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                               env=dict(os.environ, PYTHONPATH=str(REPO)))
        seen["process"] = f"{other.returncode} {other.stdout.strip()}"
        capsys.readouterr()
        seen["import"] = str(import_.main(["--root", root, "crash", str(inputs)]))
        seen["import stderr"] = capsys.readouterr().err

    acked = run_and_kill(root, seed=1, kill_after=1.0, during=second_writers)
    code, line = seen["process"].split(" ", 1)
    assert code == "3" and "locked by another writer" in line and "\n" not in line, seen
    assert seen["import"] == "1", seen
    last = seen["import stderr"].strip().splitlines()[-1]
    assert "locked by another writer" in last and "Traceback" not in seen["import stderr"], seen["import stderr"]
    with storage.connect(root) as conn:
        table = conn.table("crash")
        table.check()
        stored = {row: data[b"cf:v"] for row, data in table.scan()}
        assert all(r in stored for r in acked) and not any(r in stored for r in rows)
    assert import_.main(["--root", root, "crash", str(inputs)]) == 0  # the writer is gone: it goes in
    with storage.connect(root) as conn:
        stored = {row: data[b"cf:v"] for row, data in conn.table("crash").scan()}
        assert all(r in stored for r in acked) and all(stored[r] == b"i0.0-" for r in rows)
