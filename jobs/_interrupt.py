"""Ctrl-C during a Spark job: cancel the job, then one line ("interrupted") and exit status 130.

PySpark's own SIGINT handler cancels the jobs over the very Py4J connection
the main thread is blocked on, then raises KeyboardInterrupt inside that
blocked call: Py4J logs a "reentrant call" and a "KeyboardInterrupt while
sending command" with their tracebacks, some 50 to 100 lines.  Here the
handler only records the interrupt and cancels the jobs from a thread of its
own (Py4J gives each thread its own connection); the blocked call then
returns with Spark's "cancelled" error, which :func:`interrupted` turns into
a plain KeyboardInterrupt.  When no Spark job is running (the driver is
busy in Python, loading a table, say), the interrupt is raised at once, as
it is by a second Ctrl-C, for a job that does not stop.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import threading
from typing import Any, Iterator

__all__ = ["cancel_on_interrupt", "interrupted"]

_requested = threading.Event()


def interrupted() -> bool:
    """True once Ctrl-C was pressed while a job's session ran (until the session ends)."""
    return _requested.is_set()


def _cancel(spark: Any) -> None:
    """Cancel the running jobs; with none running, the driver is busy in Python: interrupt it now."""
    try:
        # the job ends here: the errors Spark logs while its tasks are torn down (a completion
        # listener's missing block, killed workers) would bury the one line the user gets
        spark.sparkContext.setLogLevel("OFF")
        running = list(spark.sparkContext.statusTracker().getActiveJobsIds())
        spark.sparkContext.cancelAllJobs()
    except Exception:  # noqa: BLE001 - the context may be stopping already: nothing left to cancel
        running = []
    if not running:
        _thread.interrupt_main()  # runs the handler again, which now raises KeyboardInterrupt


@contextlib.contextmanager
def cancel_on_interrupt(spark: Any) -> Iterator[None]:
    """While the block runs, SIGINT cancels ``spark``'s jobs; an error they end with becomes KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread; another thread's caller keeps Spark's
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if _requested.is_set():
            raise KeyboardInterrupt
        _requested.set()
        threading.Thread(target=_cancel, args=(spark,), name="regionscan-cancel", daemon=True).start()

    _requested.clear()
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    except Exception:
        if _requested.is_set():
            raise KeyboardInterrupt from None  # the job's "cancelled" error says nothing the user needs
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
        if _requested.is_set():
            _requested.clear()
            raise KeyboardInterrupt
