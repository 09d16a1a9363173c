"""A fresh engine worker's read threads find their heap's pages already faulted in.

A fresh process's heap has no pages: the first reads' NumPy columns fault every page in (the
kernel zero-fills each), which a warm worker's reads, reusing its freed heap, do not.  The
worker faults one heap per read thread in before it announces its port
(``connector.worker.allocator.prefault_heaps``), and a thread started after it takes one of
those heaps.  Page faults are counted by the kernel (``ru_minflt`` of the thread), each case in
a fresh Python process; a real worker process is started as the JVM starts it.
"""

from __future__ import annotations

import os
import subprocess
import sys

from engine_worker_process import exchange, python_worker

from connector.worker.allocator import PREFAULT_BYTES
from connector.worker.server import READ_HEAPS, WORKER_BLOCK_CACHE_SIZE
from storage.engine import BLOCK_CACHE_SIZE_ENV

_READ_THREAD = """
import resource, sys, threading, time
import numpy as np
from connector.worker.allocator import keep_freed_memory, prefault_heaps
assert keep_freed_memory()
done = prefault_heaps(2, 16 << 20) if sys.argv[1] == "1" else 0
time.sleep(0.3)  # the prefault threads' arenas reach glibc's free list when their pthreads end
faults = []
def read():  # a read thread's batch: twelve 1 MiB columns, written as a decode writes them
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    columns = [np.ones(1 << 17, dtype=np.int64) for _ in range(12)]
    faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
    del columns
t = threading.Thread(target=read)
t.start()
t.join()
print(done, faults[0])
"""


def _read_thread_faults(prefault: bool) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", _READ_THREAD, "1" if prefault else "0"], capture_output=True,
                         text=True, timeout=120, env={k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")})
    assert out.returncode == 0, out.stderr
    done, faults = map(int, out.stdout.split())
    return done, faults


def test_a_thread_started_after_the_prefault_writes_its_first_columns_without_faulting_them_in():
    done, faults = _read_thread_faults(prefault=True)
    assert done == 2 * (16 << 20)
    # 12 MiB is 3072 pages of 4 KiB: a fresh arena faults each of them in
    assert faults < 500, f"{faults} page faults for 12 MiB of columns in a thread after the prefault"


def test_without_the_prefault_a_new_read_thread_faults_its_columns_in():
    done, faults = _read_thread_faults(prefault=False)
    assert done == 0
    assert faults >= 2500, f"only {faults} page faults for 12 MiB of columns in a fresh thread"


def test_prefault_heaps_does_nothing_where_the_worker_did_not_set_the_allocator():
    code = ("from connector.worker.allocator import prefault_heaps\n"
            "ran = []\n"
            "print(prefault_heaps(2, 16 << 20, during=lambda: ran.append(1)), ran)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "[1]"]  # nothing faulted in, and what runs meanwhile still ran


def _rss_anon(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon")


def _worker_stats() -> tuple[dict, int]:
    """A real worker's stats once it announced its port, and its RssAnon then."""
    with python_worker("prefault-secret") as (proc, port, _line):
        stats, _, _ = exchange(port, "prefault-secret", {"op": "stats"})
        return stats, _rss_anon(proc.pid)


def test_a_real_worker_faults_one_heap_per_read_thread_in_before_it_announces_its_port(monkeypatch):
    monkeypatch.delenv(BLOCK_CACHE_SIZE_ENV, raising=False)  # the worker's default cache (1 GiB)
    stats, anon = _worker_stats()
    assert stats["block_cache"]["capacity_bytes"] == WORKER_BLOCK_CACHE_SIZE, stats
    assert stats["prefaulted_bytes"] == READ_HEAPS * PREFAULT_BYTES, stats
    assert stats["warm_up_s"] is not None  # the imports ran meanwhile, before the announcement
    # the faulted pages are resident: they count in the worker's memory at its start
    assert anon >= READ_HEAPS * PREFAULT_BYTES


def test_a_worker_with_a_small_cache_faults_a_sixteenth_of_it_per_heap(monkeypatch):
    monkeypatch.setenv(BLOCK_CACHE_SIZE_ENV, str(32 << 20))  # spark.regionscan.worker.blockCacheSize
    stats, _ = _worker_stats()
    assert stats["prefaulted_bytes"] == READ_HEAPS * (2 << 20), stats
