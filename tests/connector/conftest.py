"""Fixtures of the connector tests.

``jvm``: the JVM source's engine-worker class in the suite's shared Spark session (its
``statsJson``, ``currentPid`` ...), after checking that the session carries the JVM source.
"""

from __future__ import annotations

import pytest

from spark_plans import worker_class


@pytest.fixture(scope="session")
def jvm(spark):
    """``regionscan.spark.WorkerProcess`` of the shared session's JVM."""
    from connector.session import jvm_source_loaded

    assert jvm_source_loaded(spark), "the suite's session must carry the JVM source (javac is on this machine)"
    return worker_class(spark)
