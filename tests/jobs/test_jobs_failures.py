"""A job that fails or is stopped inside Spark says so in one line, as ``regionscan`` run by a user.

Each case runs the ``regionscan`` command in a child process (a real local
Spark: its JVM, its Python workers) and reads its stderr as a terminal would
show it.  The one line the JVM itself prints at start (``WARNING: Using
incubator modules``, from Java's module system, before any Spark code runs)
is the only other line allowed.  A failed task's whole stack goes to a log
file the line names; Ctrl-C (SIGINT to the whole process group, as a
terminal sends it) cancels the job and prints ``interrupted``.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

import storage
from storage.storefile import StoreFileReader
from storage.vfs.fs import FileSystem
from suite_paths import REPO as REPO_ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]

_JVM_NOTICE = re.compile(r"^WARNING: Using incubator modules: ")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def _lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip() and not _JVM_NOTICE.match(line)]


def _regionscan(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jobs.cli", *argv], capture_output=True, text=True, env=_env(),
                          timeout=timeout)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """A good root and a copy of it with one store file's key chunk damaged."""
    base = tmp_path_factory.mktemp("failures")
    good = base / "good"
    conn = storage.connect(str(good))
    table = conn.create_table("t", {"cf": {}}, split_keys=[b"m"])
    for i in range(100):
        table.put(b"r%03d" % i, {b"cf:a": b"%d" % i})
    table.flush()
    conn.close()
    bad = base / "bad"
    shutil.copytree(good, bad)
    (store_file,) = glob.glob(str(bad / "t" / "regions" / "*" / "cf" / "*.sf"))
    with StoreFileReader(FileSystem(os.path.dirname(store_file)), os.path.basename(store_file)) as reader:
        start = reader._index.offsets[0] + reader._index.chunks.entries(0)[0][0]  # the first block's key chunk
        size = reader._index.chunks.entries(0)[0][1]
    data = bytearray(open(store_file, "rb").read())
    data[start:start + size] = bytes(b ^ 0x5A for b in data[start:start + size])
    open(store_file, "wb").write(bytes(data))
    return good, bad


def test_a_corrupt_block_in_a_task_is_one_line_and_its_stack_goes_to_a_named_log(tables, tmp_path):
    _, bad = tables
    out = tmp_path / "out"
    done = _regionscan("export", "--root", str(bad), "t", str(out))
    assert done.returncode == 1
    lines = _lines(done.stderr)
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith("regionscan export: failed: Spark job failed: storage.errors.CorruptionError: "
                           "data block key chunk checksum mismatch in "), line
    log = re.search(r"\(full stack in (\S+\.log)\)$", line).group(1)
    text = open(log, encoding="utf-8").read()
    os.unlink(log)
    # nothing is lost: the worker's Python traceback and the JVM's stack are both in the log
    assert "Traceback (most recent call last)" in text and "storage/storefile/" in text
    assert "org.apache.spark" in text and "CorruptionError" in text
    assert not out.exists()  # the failed export left no partial output


def test_a_value_the_serde_cannot_decode_is_one_line(tables, tmp_path):
    good, _ = tables
    done = _regionscan("export", "--root", str(good), "t", str(tmp_path / "out"), "--mapping",
                       "k STRING :key, a INT cf:a", "--serde", "binary")
    assert done.returncode == 2
    lines = _lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("regionscan export: error: cannot decode column 'a' of row b'r"), lines[0]


def _python_workers(session: int) -> int:
    """Spark's Python worker processes (``pyspark.daemon`` and its forks) in process session ``session``."""
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == session and b"pyspark.daemon" in cmdline:
            count += 1
    return count


def test_ctrl_c_during_a_spark_job_is_one_line(tmp_path):
    root = str(tmp_path / "tables")
    made = _regionscan("pe", "--root", root, "--rows", "1000", "--valueSize", "10", "sequentialWrite")
    assert made.returncode == 0, made.stderr
    # one client task reading for a very long time
    proc = subprocess.Popen([sys.executable, "-m", "jobs.cli", "pe-distributed", "--root", root, "--rows",
                             "1000000000", "--valueSize", "10", "randomRead", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), start_new_session=True)
    try:
        deadline = time.monotonic() + 400
        # a forked worker besides the daemon: the task is running in Python
        while _python_workers(proc.pid) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(2)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert _lines(err) == ["interrupted"], err
