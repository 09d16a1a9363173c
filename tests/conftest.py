"""Suite-wide fixtures.

``spark``: one local SparkSession for the whole test run, created on first
use (starting Spark takes 10-40 s, so tests share it) and stopped at the
end.  Python workers run this interpreter with the repository on their
path, so they import the project's packages and Spark registers the
``regionscan`` source through ``pyspark_regionscan``.
"""

from __future__ import annotations

import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tests/s3_server.py

from s3_server import FAKE_CREDENTIALS, S3Server  # noqa: E402


def spark_environment() -> dict[str, str]:
    """The environment a Spark driver or worker of the tests needs.

    It includes the fake credentials of the local S3 server (tests/s3_server.py):
    Python workers inherit the environment the session started with, so an
    ``s3://`` table read through the shared session later needs them from the start.
    """
    path = os.environ.get("PYTHONPATH", "")
    parts = [REPO_ROOT] + [p for p in path.split(os.pathsep) if p and p != REPO_ROOT]
    return {
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(parts),
        **FAKE_CREDENTIALS,
    }


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
