"""A failed Spark job as one line on the terminal, its full stack in a log file the line names.

A task's error reaches the driver wrapped twice: a Py4J/PySpark exception
whose text holds the JVM stack, and inside it the Python worker's traceback.
The terminal gets the one line that matters (the Python exception a task
raised, or the first line Spark gave); the whole text, with the driver's own
traceback, goes to ``regionscan-<job>-<time>-<pid>.log`` in the temporary
folder, so nothing is lost.  Spark's own loggers that would print the same
stacks again (a failed task is logged by the executor and by the scheduler)
are turned off while a job's session runs
(:func:`connector.session.quiet_task_failures`).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
import traceback

__all__ = ["spark_error_line", "write_failure_log"]


def _text(exc: BaseException) -> str:
    """``str(exc)``; PySpark's asks the JVM (for its settings), which may be gone by now."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a stopped JVM: the description PySpark kept
        return str(getattr(exc, "_desc", "") or type(exc).__name__)


def _jvm_stack(exc: BaseException) -> str | None:
    """The JVM's stack trace PySpark kept with a captured exception (and its causes)."""
    stacks = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        stack = getattr(exc, "_stackTrace", None)
        if stack:
            stacks.append(str(stack))
        exc = exc.__cause__ or getattr(exc, "_cause", None)
    return "\n".join(stacks) or None


def spark_error_line(exc: BaseException) -> str:
    """The useful line of a failed Spark job: the Python exception a task raised, if any."""
    from connector.session import worker_import_problem

    text = _text(exc)
    problem = worker_import_problem(text)
    if problem is not None:
        return problem
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith(("storage.", "serde.", "connector.", "jobs.")) or "Error:" in line.split(" ")[0]:
            return line
    for line in lines:
        if "Exception" in line or "Error" in line:
            return line
    return lines[0] if lines else type(exc).__name__


def write_failure_log(job: str, exc: BaseException) -> str | None:
    """Write ``exc``'s whole text and traceback to a new log file; its path (None if it cannot be written)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", job).strip("-") or "job"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        fd, path = tempfile.mkstemp(prefix=f"regionscan-{safe}-{stamp}-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(f"regionscan {job}: the Spark job failed at {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n\n")
            try:
                out.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
            except Exception:  # noqa: BLE001 - str() of a PySpark error needs a JVM that may be gone
                out.write("".join(traceback.format_tb(exc.__traceback__)) + _text(exc) + "\n")
            jvm = _jvm_stack(exc)
            if jvm and jvm not in _text(exc):
                out.write("\nJVM stack trace:\n" + jvm + "\n")
    except OSError:
        return None
    return path
