"""Terminal progress for long jobs: rows, MB, rate and ETA on one line, then a summary.

A job reports absolute totals (``update``) or increments (``add``) as often
as it likes: once per batch or per finished Spark task, never once per row.
On a terminal a tqdm bar is redrawn in place at most every ``interval``
seconds (tqdm draws, sizes and clears the line, and works out the
percentage and ETA from the tasks or bytes done); anywhere else (a log
file, a pipe, a test) nothing is drawn until :meth:`Progress.finish` prints
the one summary line, which stays this module's: it is the job's result,
printed to stdout, not a terminal drawing.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["Progress", "format_bytes"]


def format_bytes(n: float) -> str:
    """``1234567`` -> ``"1.2 MB"`` (decimal units, as rates are usually quoted)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


class Progress:
    """Progress of one job stage.

    ``total_tasks`` (or, failing that, ``total_bytes``) lets the bar show a
    percentage and an ETA (tqdm's, from the work done so far).  ``enabled``
    forces drawing on or off; by default the bar is drawn only when
    ``stream`` is a terminal.
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
        self._bar: Any = None  # the tqdm bar, made at the first draw (the totals may come later)
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

    def _counts(self) -> str:
        elapsed = self.elapsed
        rate = self.rows / elapsed if elapsed > 0 else 0.0
        return f"{self.label}: {self.rows:,} {self.unit}  {format_bytes(self.nbytes)}  {rate:,.0f} {self.unit}/s"

    def _make_bar(self) -> Any:
        from tqdm import tqdm

        if self.total_tasks:
            total, done = self.total_tasks, "  tasks {n_fmt}/{total_fmt} {bar:12} {percentage:3.0f}% ETA {remaining}"
        elif self.total_bytes:
            total, done = self.total_bytes, "  {bar:12} {percentage:3.0f}% ETA {remaining}"
        else:
            total, done = None, ""
        return tqdm(total=total, file=self.stream, leave=False, mininterval=0, dynamic_ncols=True,
                    bar_format="{desc}" + done + "  {elapsed}", desc=self._counts())

    def _maybe_draw(self, force: bool = False) -> None:
        if not self.enabled or self.finished:
            return
        now = time.perf_counter()
        if not force and now - self._drawn_at < self.interval:
            return
        self._drawn_at = now
        if self._bar is None:
            self._bar = self._make_bar()
        bar = self._bar
        bar.n = self.tasks if self.total_tasks else min(self.nbytes, self.total_bytes or self.nbytes)
        bar.set_description_str(self._counts(), refresh=False)
        bar.refresh()

    def _clear(self) -> None:
        if self._bar is not None:
            self._bar.close()  # leave=False: tqdm wipes its line
            self._bar = None

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
        self._clear()
        if not self.finished:
            self.ended = time.perf_counter()
        self.finished = True
        text = self.summary()
        print(text, file=stream if stream is not None else sys.stdout)
        return text

    def close(self) -> None:
        """Clear the line without a summary (a failed stage)."""
        self._clear()
        if not self.finished:
            self.ended = time.perf_counter()
        self.finished = True
