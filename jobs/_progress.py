"""Terminal progress for long jobs: rows, MB, rate and ETA on one line, then a summary.

A job reports absolute totals (``update``) or increments (``add``) as often
as it likes: once per batch or per finished Spark task, never once per row.
On a terminal the line is redrawn in place at most every ``interval``
seconds; anywhere else (a log file, a pipe, a test) nothing is drawn until
:meth:`Progress.finish` prints the one summary line.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress", "format_bytes", "format_duration"]


def format_bytes(n: float) -> str:
    """``1234567`` -> ``"1.2 MB"`` (decimal units, as rates are usually quoted)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def format_duration(seconds: float) -> str:
    """``75.2`` -> ``"1:15"``; ``3700`` -> ``"1:01:40"``."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """Progress of one job stage.

    ``total_tasks`` (or, failing that, ``total_bytes``) lets the line show a
    percentage and an ETA.  ``enabled`` forces drawing on or off; by default
    the line is drawn only when ``stream`` is a terminal.
    """

    def __init__(self, label: str, *, total_tasks: int | None = None, total_bytes: int | None = None,
                 stream: TextIO | None = None, interval: float = 0.5, enabled: bool | None = None,
                 unit: str = "rows"):
        self.label = label
        self.total_tasks = total_tasks
        self.total_bytes = total_bytes
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.unit = unit
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.rows = 0
        self.nbytes = 0
        self.tasks = 0
        self.started = time.perf_counter()
        self.ended: float | None = None
        self._drawn_at = 0.0
        self._width = 0
        self.finished = False

    # -- reporting -----------------------------------------------------------
    def start(self) -> None:
        """Restart the clock: the work begins now (set-up before it is not part of the rate)."""
        self.started = time.perf_counter()
        self._drawn_at = 0.0

    def update(self, rows: int, nbytes: int = 0, tasks: int | None = None) -> None:
        """Set the totals so far (from an accumulator, say) and redraw if it is time."""
        self.rows = int(rows)
        self.nbytes = int(nbytes)
        if tasks is not None:
            self.tasks = int(tasks)
        self._maybe_draw()

    def add(self, rows: int, nbytes: int = 0, tasks: int = 0) -> None:
        """Add to the totals (once per batch) and redraw if it is time."""
        self.rows += int(rows)
        self.nbytes += int(nbytes)
        self.tasks += int(tasks)
        self._maybe_draw()

    @property
    def elapsed(self) -> float:
        """Seconds since the stage started."""
        end = self.ended if self.ended is not None else time.perf_counter()
        return end - self.started

    def fraction(self) -> float | None:
        """How much is done, 0..1, when a total is known."""
        if self.total_tasks:
            return min(1.0, self.tasks / self.total_tasks)
        if self.total_bytes:
            return min(1.0, self.nbytes / self.total_bytes)
        return None

    def eta(self) -> float | None:
        """Seconds left, extrapolated from the fraction done so far."""
        done = self.fraction()
        if not done:
            return None
        return self.elapsed * (1.0 - done) / done

    def line(self) -> str:
        """The progress line as it would be drawn now."""
        elapsed = self.elapsed
        rate = self.rows / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.label}: {self.rows:,} {self.unit}", format_bytes(self.nbytes), f"{rate:,.0f} {self.unit}/s"]
        if self.total_tasks:
            parts.append(f"tasks {self.tasks}/{self.total_tasks}")
        done = self.fraction()
        if done is not None:
            eta = self.eta()
            parts.append(f"{done * 100:.0f}%" + (f" ETA {format_duration(eta)}" if eta is not None else ""))
        parts.append(format_duration(elapsed))
        return "  ".join(parts)

    def _maybe_draw(self, force: bool = False) -> None:
        if not self.enabled or self.finished:
            return
        now = time.perf_counter()
        if not force and now - self._drawn_at < self.interval:
            return
        self._drawn_at = now
        text = self.line()
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def refresh(self) -> None:
        """Redraw now (a poller calls this on its own clock)."""
        self._maybe_draw(force=True)

    def summary(self) -> str:
        """The final one-line summary."""
        elapsed = self.elapsed
        rate = self.rows / elapsed if elapsed > 0 else 0.0
        mb_rate = self.nbytes / 1e6 / elapsed if elapsed > 0 else 0.0
        tasks = f", {self.tasks} task(s)" if self.tasks else ""
        return (f"{self.label}: {self.rows:,} {self.unit}, {format_bytes(self.nbytes)} in {elapsed:.2f} s "
                f"({rate:,.0f} {self.unit}/s, {mb_rate:.1f} MB/s){tasks}")

    def finish(self, stream: TextIO | None = None) -> str:
        """Clear the progress line and print the summary (to ``stream``, default stdout); return it."""
        if self.finished:
            return self.summary()
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
        if not self.finished:
            self.ended = time.perf_counter()
        self.finished = True
        text = self.summary()
        print(text, file=stream if stream is not None else sys.stdout)
        return text

    def close(self) -> None:
        """Clear the line without a summary (a failed stage)."""
        if self.enabled and self._width and not self.finished:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
        if not self.finished:
            self.ended = time.perf_counter()
        self.finished = True
