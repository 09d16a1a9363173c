"""A correctly configured SparkSession for the ``regionscan`` source, and its registration.

A Spark session reads ``regionscan`` tables when three things hold:

* its Python workers run an interpreter that imports this project
  (``PYSPARK_PYTHON``; without it they start the system ``python3`` and fail
  with ``No module named 'connector'``), and on machines whose hostname
  resolves to loopback Spark needs ``SPARK_LOCAL_IP``;
* the source is registered: Spark finds ``pyspark_regionscan`` by itself
  when that module is on its workers' path, and :func:`register` does it
  explicitly otherwise (an editable install that hides the module);
* ``spark.sql.python.filterPushdown.enabled`` is on, so key ranges and
  engine filters are pushed down (with it off every read still returns
  the right rows: Spark then filters them itself);
* ``spark.sql.execution.pyspark.udf.hideTraceback.enabled`` is on, so an
  error of the source (a misspelled option, a missing table) reads as one
  line, Spark's error class and then the source's message, instead of a
  Python traceback.

On a cluster the executors open ``s3://`` tables themselves, so a new
session also hands them the driver's ``AWS_*`` environment
(:func:`forwarded_environment`).

A session :func:`spark_session` starts keeps a script's output its own:
Spark's log is configured before its JVM's first line (:data:`LOG_CONFIG`:
warnings and errors only, no start-up notes), stage progress bars are off,
and a failed task's stack is not logged twice more by the executor and the
scheduler (:func:`quiet_task_failures`): the error the script gets is one
line, which names the engine worker's log where the engine failed.

:func:`spark_session` gives such a session; :func:`register` fixes up one
that already runs.  This module imports pyspark only when called.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, Mapping

__all__ = [
    "worker_import_problem",
    "PUSHDOWN_CONF",
    "HIDE_TRACEBACK_CONF",
    "code_root",
    "prepare_local_environment",
    "register",
    "FORWARDED_ENV",
    "forwarded_environment",
    "session_conf",
    "jvm_source_conf",
    "JVM_SOURCE_CONF",
    "spark_session",
    "quiet_spark_logs",
    "quiet_task_failures",
    "LOG_CONFIG",
    "TASK_FAILURE_LOGGERS",
]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
# Python errors of data sources (and UDFs) come back without their traceback, so the first
# line of Spark's AnalysisException carries the source's own one-line message.
HIDE_TRACEBACK_CONF = "spark.sql.execution.pyspark.udf.hideTraceback.enabled"
SOURCE_NAME = "regionscan"
JVM_SOURCE_CONF = "spark.regionscan.jvm"
"""``false`` keeps a new session off the JVM source (``format("regionscan")`` is then the Python source)."""
# Spark's log settings for the sessions regionscan starts in a JVM of its own (connector.spark_session
# and the jobs).  Resolved when used: on an executor this module may be imported from a shipped zip.
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
# Spark logs each failed task with its whole stack: the executor ("Exception in task"), the
# scheduler ("Lost task", "aborting job"), and for a catalog table's write the V2 write's task and
# exec ("Aborting commit for partition", "is aborting").  The driver's exception carries the failure.
TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager",
                        "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
                        "org.apache.spark.sql.execution.datasources.v2.AppendDataExec",
                        "org.apache.spark.sql.execution.datasources.v2.OverwriteByExpressionExec")


def code_root() -> str:
    """The folder that holds the ``storage`` / ``serde`` / ``connector`` / ``jobs`` packages."""
    return str(Path(__file__).resolve().parents[1])


def prepare_local_environment() -> None:
    """Environment a Spark JVM started from this process passes on to its Python workers.

    ``SPARK_LOCAL_IP`` and ``PYSPARK_PYTHON`` are set only when unset; the
    folder holding the project's packages goes first on ``PYTHONPATH`` so
    local workers import the same code as this process.
    """
    # The machine's hostname may resolve to loopback: Spark then warns and picks another
    # interface, which can be unreachable; a local session needs nothing but loopback.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers otherwise start the system python3, which lacks this environment's packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = code_root()
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root] + paths)


_MISSING_PACKAGE = re.compile(r"No module named '((?:storage|serde|connector|jobs|pyspark_regionscan)[\w.]*)'")


def worker_import_problem(error_text: str) -> str | None:
    """The one-line explanation when a Spark error says its Python workers cannot import this project.

    Spark reports it as ``No module named 'connector'`` deep in a worker
    traceback; None when ``error_text`` says nothing of the kind.
    """
    found = _MISSING_PACKAGE.search(error_text)
    if found is None:
        return None
    return (f"Spark's Python workers cannot import regionscan (No module named '{found.group(1)}'): their Python "
            f"lacks the package. Set PYSPARK_PYTHON to a Python where regionscan is installed (locally "
            f"connector.spark_session() sets it to this one), or install regionscan on every executor")


def quiet_spark_logs(spark: Any, verbose: bool = False) -> None:
    """Spark's log at WARN (INFO when ``verbose``): its INFO lines would hide a job's result."""
    spark.sparkContext.setLogLevel("INFO" if verbose else "WARN")


def _log4j(jvm: Any, name: str, level: str) -> None:
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.toLevel(level))


def quiet_task_failures(spark: Any) -> None:
    """Stop Spark's log from printing each failed task's stack: the error the driver raises says
    what failed in one line (and, for the engine, names the worker log that has the stack).
    ``Configurator.setLevel`` of these loggers back to ``DEBUG`` shows the stacks again."""
    try:
        jvm = spark.sparkContext._jvm
        for name in TASK_FAILURE_LOGGERS:
            _log4j(jvm, name, "OFF")
        # a cancelled job's workers are killed with a warning each; the job says "interrupted" once
        _log4j(jvm, "org.apache.spark.api.python.PythonRunner", "ERROR")
        # a failed job's other tasks are interrupted; one closing its shuffle file warns with a stack
        _log4j(jvm, "org.sparkproject.guava.io.Closeables", "ERROR")
    except Exception:  # noqa: BLE001 - Spark Connect, or a JVM without log4j 2: leave its log alone
        return


def _already_registered(spark: Any, name: str = SOURCE_NAME) -> bool:
    # Registering a name Spark found by itself logs "replaced a statically registered data
    # source"; ask the JVM first (classic sessions only; Spark Connect has no _jsparkSession).
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        return bool(manager.dataSourceExists(name))
    except Exception:  # noqa: BLE001 - Spark Connect or another JVM API: register explicitly
        return False


_ALREADY_EXISTS = "DATA_SOURCE_ALREADY_EXISTS"


def _register_source(spark: Any, source: type, name: str) -> None:
    """Register ``source`` under ``name`` on ``spark`` unless it is there.

    pyspark registers through ``SparkSession.dataSource()``, whose registry is
    the first session's: on a new session of the same context
    (``spark.newSession()``) it refuses with ``DATA_SOURCE_ALREADY_EXISTS``
    while the new session's own manager, where its reads look, lacks the
    source.  Then the source goes into that manager directly, as pyspark
    would have put it (its wrapped class in a ``UserDefinedPythonDataSource``).
    """
    if _already_registered(spark, name):
        return
    try:
        spark.dataSource.register(source)
        return
    except Exception as exc:  # noqa: BLE001 - pyspark's AnalysisException; anything else is raised again
        if _ALREADY_EXISTS not in str(exc):
            raise
    from pyspark.sql.udf import _wrap_function

    sc = spark.sparkContext
    python_source = getattr(sc._jvm, "org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource")
    manager = spark._jsparkSession.sessionState().dataSourceManager()
    manager.registerDataSource(name, python_source(_wrap_function(sc, source)))


def jvm_source_loaded(spark: Any) -> bool:
    """Whether the JVM source is on ``spark``'s classpath (then it serves ``format("regionscan")``)."""
    try:
        jvm = spark._jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName("regionscan.spark.RegionScanProvider", False, loader)
        return True
    except Exception:  # noqa: BLE001 - not found, or Spark Connect (no JVM here)
        return False


def register(spark: Any = None) -> bool:
    """Make ``spark`` (default: the active session) read and write ``format("regionscan")``.

    Registers the Python source as ``regionscan_python`` and, unless Spark
    already found it, as ``regionscan`` (the JVM source wins that name where
    its jar is on the classpath; a session started without it says so once),
    and turns Python filter pushdown and one-line Python errors on.  Calling
    it again, or on another session of the same context
    (``spark.newSession()``), is harmless.  Returns False when there is no
    session.
    """
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            return False
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.conf.set(HIDE_TRACEBACK_CONF, "true")
    from .python_source import PYTHON_SOURCE_NAME, PythonRegionScanDataSource, RegionScanDataSource

    _register_source(spark, RegionScanDataSource, SOURCE_NAME)
    _register_source(spark, PythonRegionScanDataSource, PYTHON_SOURCE_NAME)
    if not jvm_source_loaded(spark) and not _told:
        _told.append(True)
        import logging

        logging.getLogger("connector.session").warning(
            "the regionscan JVM source is not on this session's classpath (start it with connector.spark_session() "
            "or --jars from 'regionscan build-jvm-source'): format('regionscan') is served by the Python source")
    return True


_told: list[bool] = []


# What the AWS tools read from the environment: credentials, region, endpoint, profile.
FORWARDED_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE")
# Spark's default redaction pattern, widened to AWS_ACCESS_KEY_ID's spelling.
_REDACTION = "(?i)secret|password|token|access[._]?key"


def forwarded_environment(conf: Mapping[str, str]) -> dict[str, str]:
    """Spark settings that hand the driver's object-store environment to the executors.

    Tables on ``s3://`` are opened by the executors themselves, so they need
    the credentials, region and endpoint the driver has.  They travel as
    ``spark.executorEnv.<NAME>`` settings, never in job arguments, table
    roots or plans; Spark redacts settings matching ``spark.redaction.regex``
    in its UI, event logs and messages, and the pattern set here also covers
    ``AWS_ACCESS_KEY_ID``.  Settings the user gave win.
    """
    out = {f"spark.executorEnv.{name}": os.environ[name] for name in FORWARDED_ENV
           if os.environ.get(name) and f"spark.executorEnv.{name}" not in conf}
    if out and "spark.redaction.regex" not in conf:
        out["spark.redaction.regex"] = _REDACTION
    return out


def jvm_source_conf(conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """Settings that put the JVM source on a new session's classpath (empty where it cannot be built).

    The jar must be there when the JVM starts, so it is built (or found in
    the cache) now and added to ``spark.jars``; the engine worker it starts
    runs this Python (``spark.regionscan.python``).  Where there is no JDK,
    or ``spark.regionscan.jvm`` is ``false``, nothing is added and
    ``format("regionscan")`` is the Python source (said once, in one line).
    """
    conf = dict(conf or {})
    if conf.get(JVM_SOURCE_CONF, "true").strip().lower() == "false":
        return {}
    from .worker import jvm_source_jar

    jar = jvm_source_jar()
    if jar is None:
        return {}
    jars = [j for j in conf.get("spark.jars", "").split(",") if j.strip()]
    return {"spark.jars": ",".join(jars + [str(jar)]), "spark.regionscan.python": conf.get(
        "spark.regionscan.python", sys.executable)}


def session_conf(master: str, conf: Mapping[str, str] | None = None, verbose: bool = False) -> dict[str, str]:
    """The settings :func:`spark_session` builds a new session on ``master`` with.

    Pushdown on; no stage progress bars; unless ``verbose``, the driver
    JVM's log configured before its first line (:data:`LOG_CONFIG`); for
    local masters the web UI off and 8 shuffle partitions; the driver's
    object-store environment forwarded to the executors
    (:func:`forwarded_environment`); then ``conf``, whose settings win;
    then the JVM source's jar (:func:`jvm_source_conf`).
    """
    conf = dict(conf or {})
    out = {PUSHDOWN_CONF: "true", "spark.ui.showConsoleProgress": "false"}
    if not verbose:
        # read as the JVM starts: its start-up notes (the log4j profile, the setLogLevel hint,
        # NativeCodeLoader) never reach the script's terminal
        out["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={LOG_CONFIG.resolve().as_uri()}"
    if master == "local" or master.startswith("local["):
        out.update({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "8"})
    return {**out, **forwarded_environment(conf), **conf, **jvm_source_conf(conf)}


def spark_session(master: str = "local[*]", app_name: str = "regionscan", conf: Mapping[str, str] | None = None,
                  verbose: bool = False) -> Any:
    """A SparkSession ready for ``spark.read.format("regionscan")``.

    Returns the active session (registered, pushdown on) if one runs;
    otherwise starts one on ``master`` with the environment of
    :func:`prepare_local_environment` and the settings of
    :func:`session_conf` (pushdown on, the driver's ``AWS_*`` credentials,
    region and endpoint passed to the executors for ``s3://`` roots,
    ``conf`` added), and Spark's log at WARN without failed tasks' stacks
    (``verbose``: INFO, and Spark's own log settings).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        register(active)
        return active
    prepare_local_environment()
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in session_conf(master, conf, verbose).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    quiet_spark_logs(spark, verbose)
    if not verbose:
        quiet_task_failures(spark)
    register(spark)
    return spark
