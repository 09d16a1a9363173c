"""The engine worker keeps the column buffers a batch frees for the next batch.

A read allocates and frees a row group's columns at once (a dozen NumPy arrays of 42K values).
With glibc's own thresholds the freed heap top went back to the kernel after each batch, and
the next batch faulted every page in again.  ``connector.worker.allocator.keep_freed_memory``
(run by ``python -m connector.engine_worker`` before it serves) fixes the thresholds, so a
steady stream of such batches faults no page.  Each case runs in a fresh Python process, the
page faults counted by the kernel (``ru_minflt``).
"""

from __future__ import annotations

import os
import subprocess
import sys


_BATCHES = """
import resource, sys
import numpy as np
from connector.worker.allocator import keep_freed_memory
import connector.worker.server
tuned = keep_freed_memory() if sys.argv[1] == "1" else False
if sys.argv[1] == "worker":  # the worker's command, stopped at once: no secret in the environment
    import runpy
    try:
        runpy.run_module("connector.engine_worker", run_name="__main__")
    except SystemExit as stop:
        assert stop.code == 2
def batch():
    columns = [np.ones(42_000, dtype=np.int64) for _ in range(12)]  # 330 KiB each, freed together
    return sum(int(c[0]) for c in columns)
for _ in range(5):
    batch()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(100):
    batch()
print(int(tuned), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _run(tune: bool | str, **env: str) -> tuple[bool, int]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("MALLOC_") and k not in ("GLIBC_TUNABLES", "REGIONSCAN_WORKER_SECRET")}
    mode = tune if isinstance(tune, str) else "1" if tune else "0"
    out = subprocess.run([sys.executable, "-c", _BATCHES, mode], env={**clean, **env},
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    return out[0] == "1", int(out[1])


def test_freed_columns_are_reused_without_page_faults():
    tuned, faults = _run(True)
    untuned, before = _run(False)
    assert tuned and not untuned
    # 100 batches of 12 columns of 82 pages: glibc's own thresholds fault most of them again
    assert before > 20_000, before
    assert faults < before // 20, (faults, before)


def test_thresholds_set_in_the_environment_are_kept():
    """``MALLOC_TRIM_THRESHOLD_`` given by whoever starts the worker wins: nothing is changed."""
    tuned, _ = _run(True, MALLOC_TRIM_THRESHOLD_="131072")
    assert not tuned


def test_the_worker_command_keeps_freed_memory():
    """``python -m connector.engine_worker`` applies it before anything else (here it then stops:
    no secret); importing the package does not, so an embedding application's allocator is its own."""
    _, faults = _run("worker")
    _, imported = _run("imported")
    assert imported > 20_000, imported
    assert faults < imported // 20, (faults, imported)
