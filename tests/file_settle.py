"""Waiting out the racily-clean window of storage/region/file_stamps.py in tests."""

from __future__ import annotations

import os
import time

from storage.region import file_stamps


def settle(*paths: str) -> None:
    """Wait until each file is older than the clock granule, so that a result
    built from it from now on may be kept (20 ms, or 3 s for a file whose
    mtime falls on a whole millisecond)."""
    for path in paths:
        while True:
            st = os.stat(path)
            window = file_stamps.COARSE_RACY_NS if st.st_mtime_ns % 1_000_000 == 0 else file_stamps.RACY_NS
            if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > window + 2_000_000:
                break
            time.sleep(0.005)
