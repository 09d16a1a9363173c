"""Suite-wide fixtures.

``spark``: one local SparkSession for the whole test run, created on first
use (starting Spark takes 10-40 s, so tests share it) and stopped at the
end.  Python workers run this interpreter with the repository on their
path, so they import the project's packages and Spark registers the
``regionscan`` source through ``pyspark_regionscan``.  ``source_format``: each
Spark source in turn.  ``s3_server`` and ``s3_root``: a local S3-compatible server and a
fresh ``s3://`` root in it.

A package's folder (tests/storage, tests/connector) has a conftest of its own for the
fixtures its tests share.  What tests share that is not a fixture (factories taking
arguments, probes, strategies) lives in a plain module beside the tests that use it (here for
the whole suite, in a package's folder for its tests), never in a test module or a conftest:
pytest imports every conftest under the one name ``conftest``.
"""

from __future__ import annotations

import os
import sys

import pytest

# the suite's shared modules (tests/*.py that are not tests: suite_paths, s3_server, serde_tables ...)
# import by their own names from every folder of the suite
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from s3_server import S3Server  # noqa: E402
from spark_environment import spark_environment  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    """A shared local[2] SparkSession with Python filter pushdown on."""
    os.environ.update(spark_environment())
    from pyspark.sql import SparkSession

    from connector.session import jvm_source_conf

    builder = SparkSession.builder
    for key, value in jvm_source_conf().items():  # the JVM source's jar, built before the JVM starts
        builder = builder.config(key, value)
    session = (
        builder.master("local[2]")
        .appName("regionscan-tests")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    import connector

    connector.register(session)
    try:
        yield session
    finally:
        session.stop()


SOURCE_FORMATS = ("regionscan_python", "regionscan")


@pytest.fixture(params=SOURCE_FORMATS)
def source_format(request, spark) -> str:
    """Each Spark source in turn: the Python source, and ``regionscan`` (the JVM source where built)."""
    return request.param


@pytest.fixture(scope="session")
def s3_server():
    """A local S3-compatible server (moto's server mode) on 127.0.0.1 for the whole run."""
    server = S3Server().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_root(s3_server):
    """An ``s3://`` table root in a fresh bucket of the local server (short writer lease).

    6 s rather than less: renewals run every third of the lease, and on a loaded machine a
    starved renewal thread made writers refuse to commit mid-test.
    """
    return s3_server.root(lease_seconds=6)
