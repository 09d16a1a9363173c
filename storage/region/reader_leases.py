"""Reader leases: store files stay open while a scan that read them is open.

A scan takes one lease on the files of every region it will read when it
opens (:meth:`Leases.acquire`), and gives it back when it ends
(:meth:`Leases.release`): a counter per file changed twice per scan, never
checked per block read (a reference check on every block access cost HBase
a 4x slowdown).  Compaction, split and table deletion retire files with an
action (close the reader, delete or archive the file); a retired file nobody
leases is acted on at once, a leased one when its last lease ends.

:attr:`Leases.lock` is also the lock under which a table swaps a region's
files or regions and under which a scan captures its views, so a view never
pairs a new file with an old memstore or an old region list with new files.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterable

__all__ = ["Leases"]


class Leases:
    """Lease counts of a table's store files (keyed by the file object) and deferred retirements."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._counts: dict[object, int] = {}
        self._retired: dict[object, Callable[[], None]] = {}

    def acquire(self, files: Iterable[object]) -> None:
        """Lease ``files``; the caller holds :attr:`lock` (it is capturing a view)."""
        counts = self._counts
        for f in files:
            counts[f] = counts.get(f, 0) + 1

    def release(self, files: Iterable[object]) -> None:
        """End one lease of each of ``files``; runs the actions of retired files no longer leased."""
        due = []
        with self.lock:
            counts = self._counts
            for f in files:
                n = counts[f] - 1
                if n:
                    counts[f] = n
                    continue
                del counts[f]
                action = self._retired.pop(f, None)
                if action is not None:
                    due.append(action)
        for action in due:
            action()

    def retire(self, files: Iterable[object], action: Callable[[object], None],
               done: Callable[[], None] | None = None) -> None:
        """Run ``action(f)`` for each file once no scan leases it, then ``done()`` once all have run."""
        files = list(files)
        remaining = [len(files)]
        state = threading.Lock()

        def one(f: object) -> Callable[[], None]:
            def run() -> None:
                action(f)
                with state:
                    remaining[0] -= 1
                    last = remaining[0] == 0
                if last and done is not None:
                    done()
            return run

        now = []
        with self.lock:
            for f in files:
                if self._counts.get(f):
                    self._retired[f] = one(f)
                else:
                    now.append(one(f))
        for run in now:
            run()
        if not files and done is not None:
            done()

    def leased(self, f: object) -> int:
        """How many open scans hold ``f``."""
        with self.lock:
            return self._counts.get(f, 0)
