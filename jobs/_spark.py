"""Spark sessions and per-split Spark tasks for the batch jobs.

Every job runs its per-region work as Spark tasks: one task per split that
:class:`connector.input_format.TableInputFormat` hands out (one per region),
or per input file.  Where the session comes from:

* under ``spark-submit`` (the driver was started by it): the master,
  deploy mode and configuration are spark-submit's;
* ``regionscan <job>``: a local session, ``--master local[*]`` unless
  ``--master`` names another (``spark://host:7077``, ``local-cluster[...]``);
* a session already running in this process (a notebook, a test suite's
  shared session) is used as it is and not stopped afterwards.

Local sessions get ``SPARK_LOCAL_IP=127.0.0.1`` and ``PYSPARK_PYTHON`` =
this interpreter, and the repository root on ``PYTHONPATH`` so that Python
workers import the project's packages.  When the executors may be other
machines (any non-local master, or any spark-submit run) the packages
``storage``, ``serde``, ``connector`` and ``jobs`` are zipped and shipped
with ``SparkContext.addPyFile`` (``--conf regionscan.ship.code=false`` turns
that off when they are installed on every node).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from storage import InvalidArgument, StorageError

from connector.session import (
    LOG_CONFIG,
    PUSHDOWN_CONF,
    code_root,
    forwarded_environment,
    jvm_source_conf,
    prepare_local_environment,
    quiet_spark_logs,
    quiet_task_failures,
)
from jobs._failure import spark_error_line, write_failure_log
from jobs._interrupt import cancel_on_interrupt, interrupted
from jobs._progress import Progress

__all__ = [
    "SPARK_MISSING",
    "JobFailed",
    "TaskFailure",
    "under_spark_submit",
    "is_local_master",
    "repo_root",
    "prepare_local_environment",
    "add_spark_arguments",
    "parse_conf_pairs",
    "spark_session",
    "register_data_source",
    "package_zip",
    "run_tasks",
]

SPARK_MISSING = ("this job runs on Spark: install pyspark (pip install 'regionscan[spark]') "
                 "and Java 17 (java on the PATH)")
SHIP_CODE = "regionscan.ship.code"
_PACKAGES = ("storage", "serde", "connector", "jobs")
_zip_lock = threading.Lock()
_zip_path: str | None = None


class JobFailed(StorageError):
    """A job failed in Spark (a task error, Spark not starting); the message says why."""


class TaskFailure(Exception):
    """Raised in a task for bad input that retrying cannot fix (a bad line, a missing family).

    The task returns it instead of failing, so Spark does not retry it and
    the driver reports the message as an :class:`InvalidArgument`.
    """


def under_spark_submit() -> bool:
    """True when this Python process is a driver that ``spark-submit`` started."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def is_local_master(master: str | None) -> bool:
    """``local``, ``local[4]``, ``local[*]``: executors in the driver's own JVM."""
    return master is not None and (master == "local" or master.startswith("local["))


def repo_root() -> str:
    """The folder that holds the ``storage`` / ``serde`` / ``connector`` / ``jobs`` packages."""
    return code_root()


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    """``--master`` and ``--conf KEY=VALUE`` (as spark-submit spells them)."""
    group = parser.add_argument_group("Spark")
    group.add_argument("--master", default=None,
                       help="Spark master (default: local[*]; under spark-submit its own --master)")
    group.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="a Spark configuration setting (repeatable)")
    group.add_argument("--verbose", action="store_true",
                       help="let Spark log at INFO (default: warnings and errors only)")


def parse_conf_pairs(pairs: Sequence[str] | None, option: str = "--conf") -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}``; a pair without ``=`` is an error."""
    out: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = str(pair).partition("=")
        if not sep or not key.strip():
            raise InvalidArgument(f"{option} expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = value
    return out


def _import_pyspark():
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        raise JobFailed(SPARK_MISSING) from None
    return SparkContext, SparkSession


def package_zip() -> str:
    """A zip of the project's packages (built once per process) for ``addPyFile``."""
    global _zip_path
    with _zip_lock:
        if _zip_path is not None and os.path.exists(_zip_path):
            return _zip_path
        root = Path(repo_root())
        folder = tempfile.mkdtemp(prefix="regionscan-code-")
        path = os.path.join(folder, "regionscan_packages.zip")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for package in _PACKAGES:
                base = root / package
                for file in sorted(base.rglob("*")):
                    if file.is_file() and file.suffix in (".py", ".md") and "__pycache__" not in file.parts:
                        zf.write(file, file.relative_to(root).as_posix())
        _zip_path = path
        return path


def register_data_source(spark: Any) -> bool:
    """Register the connector's ``regionscan`` Spark data source (and turn pushdown on)."""
    from connector.session import register

    return bool(register(spark))


def _java_hint(exc: BaseException) -> str:
    text = str(exc)
    if "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
        return "Spark could not start its JVM: is Java 17 installed and `java` on the PATH?"
    return f"Spark could not start: {text.splitlines()[0] if text else type(exc).__name__}"


@contextlib.contextmanager
def spark_session(app_name: str, master: str | None = None, conf: Mapping[str, str] | None = None,
                  data_source: bool = False, verbose: bool = False) -> Iterator[Any]:
    """A SparkSession for one job, stopped at the end if this call started it.

    See the module docstring for where the master comes from.  ``conf``
    adds Spark settings; ``data_source`` registers the ``regionscan`` source.
    A session started here logs at WARN (``verbose``: INFO); a running
    session keeps its log level.
    """
    SparkContext, SparkSession = _import_pyspark()
    conf = dict(conf or {})
    ship = conf.pop(SHIP_CODE, "auto").strip().lower()
    if ship not in ("auto", "true", "false"):
        raise InvalidArgument(f"{SHIP_CODE} must be auto, true or false, got {ship!r}")
    existing = SparkContext._active_spark_context is not None
    submitted = under_spark_submit()
    if existing:
        # a notebook's or a test suite's session: use it as it is; only runtime settings apply
        if master is not None:
            print(f"{app_name}: --master {master} ignored: a Spark session is already running", file=sys.stderr)
        spark = SparkSession.builder.getOrCreate()
        for key, value in conf.items():
            spark.conf.set(key, value)
    else:
        builder = SparkSession.builder.appName(app_name)
        if not submitted:
            master = master or "local[*]"
            prepare_local_environment()
            builder = builder.master(master)
            if not verbose and "spark.driver.extraJavaOptions" not in conf:
                # the JVM starts here: its log is configured before its first line
                builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG_CONFIG.resolve().as_uri()}")
            if is_local_master(master):
                # a local job needs neither the web UI (startup time, a port) nor 200 shuffle partitions
                builder = builder.config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "8")
        elif master is not None:
            print(f"{app_name}: --master {master} ignored: spark-submit chose the master", file=sys.stderr)
        if submitted and not verbose and "spark.log.level" not in conf:
            # spark-submit's driver logs at INFO; Spark applies this as its context starts (after the
            # three lines naming its version), not after its 40 start-up lines as setLogLevel would
            builder = builder.config("spark.log.level", "WARN")
        builder = (builder.config("spark.ui.showConsoleProgress", "false")  # the jobs draw their own progress
                   .config(PUSHDOWN_CONF, "true"))
        jvm = jvm_source_conf(conf) if data_source and not submitted else {}
        for key, value in {**forwarded_environment(conf), **conf, **jvm}.items():
            builder = builder.config(key, value)
        try:
            spark = builder.getOrCreate()
        except Exception as exc:  # noqa: BLE001 - Py4J / PySpark start-up errors of every kind
            raise JobFailed(_java_hint(exc)) from exc
    started_here = not existing
    try:
        if started_here:
            quiet_spark_logs(spark, verbose)
            if not verbose:
                quiet_task_failures(spark)
        current = spark.sparkContext.master
        if ship == "true" or (ship == "auto" and (submitted or not is_local_master(current)) and started_here):
            spark.sparkContext.addPyFile(package_zip())
        if data_source:
            register_data_source(spark)
        with cancel_on_interrupt(spark):
            yield spark
    finally:
        if started_here:
            spark.stop()


class _Task:
    """The function a Spark task runs on one ``(index, item)``: call ``fn``, count, catch bad input."""

    def __init__(self, fn: Callable[[Any], Any], totals: Any):
        self.fn = fn
        self.totals = totals

    def __call__(self, pair: tuple[int, Any]) -> tuple[int, Any]:
        index, item = pair
        try:
            result = self.fn(item)
        except (TaskFailure, InvalidArgument) as exc:
            return index, TaskFailure(str(exc))
        self.totals.add((int(getattr(result, "rows", 0)), int(getattr(result, "nbytes", 0)), 1))
        return index, result


def _totals_param():
    from pyspark.accumulators import AccumulatorParam

    class TotalsParam(AccumulatorParam):
        """(rows, bytes, tasks) summed over finished tasks."""

        def zero(self, value):
            return (0, 0, 0)

        def addInPlace(self, a, b):
            return (a[0] + b[0], a[1] + b[1], a[2] + b[2])

    return TotalsParam()


def _spark_error(exc: BaseException, job: str) -> str:
    """The one line of a failed Spark job, naming the log file that holds its whole stack."""
    line = spark_error_line(exc)
    log = write_failure_log(job, exc)
    return f"{line} (full stack in {log})" if log else line


def run_tasks(spark: Any, fn: Callable[[Any], Any], items: Sequence[Any], progress: Progress | None = None,
              description: str | None = None, poll_seconds: float = 0.5) -> list[Any]:
    """Run ``fn(item)`` as one Spark task per item; return the results in item order.

    ``fn`` must be picklable (a module-level function, or an object of a
    module-level class).  Results may carry ``rows`` and ``nbytes``: they
    feed ``progress`` as each task finishes (a Spark accumulator, so
    nothing is sent per row).  Bad input raised in a task as
    :class:`TaskFailure` or ``InvalidArgument`` fails the job without
    retries and comes back as an ``InvalidArgument`` with the task's
    message; any other task error is retried by Spark and, if it persists,
    raised as :class:`JobFailed`.
    """
    items = list(items)
    if not items:
        return []
    sc = spark.sparkContext
    totals = sc.accumulator((0, 0, 0), _totals_param())
    rdd = sc.parallelize(list(enumerate(items)), len(items))
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(poll_seconds):
            rows, nbytes, tasks = totals.value
            progress.update(rows, nbytes, tasks)

    poller = None
    if progress is not None:
        progress.start()
    if progress is not None and progress.enabled:
        poller = threading.Thread(target=poll, name="regionscan-progress", daemon=True)
        poller.start()
    if description:
        sc.setJobDescription(description)
    try:
        pairs = rdd.map(_Task(fn, totals)).collect()
    except Exception as exc:  # noqa: BLE001 - Py4JJavaError and PySpark errors carry the task's traceback
        if progress is not None:
            progress.close()
        if interrupted():  # Ctrl-C cancelled the job: that is all there is to say
            raise KeyboardInterrupt from None
        raise JobFailed(f"Spark job failed: {_spark_error(exc, description or 'job')}") from None
    finally:
        stop.set()
        if poller is not None:
            poller.join()
        if description:
            sc.setJobDescription(None)
    results = [result for _, result in sorted(pairs, key=lambda p: p[0])]
    failures = [r for r in results if isinstance(r, TaskFailure)]
    if failures:
        if progress is not None:
            progress.close()
        more = f" (and {len(failures) - 1} more task(s) failed)" if len(failures) > 1 else ""
        raise InvalidArgument(f"{failures[0]}{more}")
    if progress is not None:
        rows, nbytes, tasks = totals.value
        progress.update(rows, nbytes, tasks)
    return results
