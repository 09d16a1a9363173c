"""The engine's clock: the one place it reads the time from.

Two readings, for two kinds of question:

- :func:`now_ms`, wall-clock milliseconds since the epoch, for times that are
  stored or compared with what another process stored: the timestamp of a
  cell written without one, TTL cutoffs, reader pins, an object store's
  writer lease, the stamps of WAL file names and bulk-load journals, and
  the age of a compaction's expired cells.
- :func:`monotonic`, seconds that only mean something as differences, for
  leases kept in memory: the region server's scanner and stream leases, the
  Thrift gateway's scanner leases, and the write path's retry back-off.

Tests install a :class:`ManualClock` with :func:`use` and move it with
:meth:`ManualClock.advance`, so a TTL or a lease runs out at once and
exactly, without sleeping; the clock is process-wide (handler and reaper
threads see it too) and the previous one is back when the ``with`` ends.

Reading it costs one function call, so callers read it once per scan,
batch or compaction, never per cell (a TTL cutoff is computed when a scan
starts, as HBase does).

What does not go through here, on purpose: durations measured for metrics
(``time.perf_counter``), socket and I/O deadlines and thread waits (real
time passes there whatever a test's clock says), and comparisons with file
modification times (the kernel stamps those from the real clock).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator, Protocol

__all__ = ["Clock", "SystemClock", "ManualClock", "now_ms", "monotonic", "use"]


class Clock(Protocol):
    """What the engine asks a clock."""

    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never goes back."""
        ...


class SystemClock:
    """The machine's clocks (``time.time`` and ``time.monotonic``): the default."""

    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch."""
        return int(time.time() * 1000)

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to, for tests.

    It starts at the machine's readings unless ``now_ms`` or ``monotonic``
    say otherwise, so what was stamped before it was installed (cells written
    with real timestamps, a lease taken on the machine's monotonic clock)
    keeps its age; :meth:`advance` moves both readings by the same amount.
    """

    def __init__(self, now_ms: int | None = None, monotonic: float | None = None):
        self._lock = threading.Lock()
        system = SystemClock()
        self._now_ms = system.now_ms() if now_ms is None else int(now_ms)
        self._monotonic = system.monotonic() if monotonic is None else float(monotonic)

    def now_ms(self) -> int:
        """The clock's wall-clock milliseconds since the epoch."""
        return self._now_ms

    def monotonic(self) -> float:
        """The clock's monotonic seconds."""
        return self._monotonic

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (both readings)."""
        if seconds < 0:
            raise ValueError(f"a clock only moves forward: advance({seconds!r})")
        with self._lock:
            self._now_ms += int(round(seconds * 1000))
            self._monotonic += seconds


_current: Clock = SystemClock()


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch, from the installed clock."""
    return _current.now_ms()


def monotonic() -> float:
    """Monotonic seconds, from the installed clock (only differences mean anything)."""
    return _current.monotonic()


@contextmanager
def use(clock: Clock) -> Iterator[Clock]:
    """Install ``clock`` for the whole process while the ``with`` block runs, then put
    the previous one back (blocks nest); yields ``clock``."""
    global _current
    previous, _current = _current, clock
    try:
        yield clock
    finally:
        _current = previous
