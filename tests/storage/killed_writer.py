"""A crash-test writer (tests/crash_writer.py) in a child process, killed with SIGKILL.

The parent learns from the child's output which writes the engine acknowledged before the
kill; the crash tests on local files and on the S3-compatible store both check those.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places

WRITER = paths.TESTS / "crash_writer.py"
REPO = paths.REPO


def run_and_kill(root: str, seed: int, kill_after: float, mode: str | None = None, during=None,
                 inside: list[bool] | None = None) -> dict:
    """Start tests/crash_writer.py on ``root`` (``mode``: its optional third argument), SIGKILL it
    ``kill_after`` seconds after it is ready (having called ``during(pid)`` first, if given), and
    return what it acknowledged: row to value, or for ``batches``/``bulkload`` name to count.

    Whether a maintenance or bulk-load kill landed inside the operation is appended to ``inside``
    when given (a list per chain of trials: several chains may run at once)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), root, str(seed), *([mode] if mode else [])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    acked: dict[bytes, bytes] = {}
    lines: list[bytes] = []
    ready = threading.Event()

    def reader():
        for line in proc.stdout:
            if line == b"READY\n":
                ready.set()
            elif line.startswith((b"IN ", b"OUT")):
                marks.append(line)
            else:
                lines.append(line)
        ready.set()

    marks: list[bytes] = []
    t = threading.Thread(target=reader)
    t.start()
    assert ready.wait(60), "the writer never got ready"
    time.sleep(kill_after)
    try:
        if during is not None:
            during(proc.pid)  # while the writer holds the table
    finally:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    t.join()
    err = proc.stderr.read().decode(errors="replace")
    assert "Traceback" not in err, err
    if marks and inside is not None:
        inside.append(marks[-1].startswith(b"IN "))
    if mode in ("batches", "bulkload"):
        return {
            name: int(count) for _, name, count in (line.split() for line in lines if line.endswith(b"\n"))
        }
    for line in lines:
        if not line.endswith(b"\n"):
            continue  # the kill cut this acknowledgement short: the write was not promised yet
        _, row, value = line.split()
        acked[bytes.fromhex(row.decode())] = bytes.fromhex(value.decode())
    return acked


def write_number(value: bytes) -> tuple[int, int]:
    """(seed, write number) of a value tests/crash_writer.py wrote: later writes have larger numbers."""
    seed, n = value[1:].split(b"-", 1)[0].split(b".")
    return int(seed), int(n)
