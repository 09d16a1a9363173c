"""The environment a Spark driver or worker of the tests runs with.

Shared by the suite's ``spark`` session (tests/conftest.py) and the tests that start Spark
processes of their own (a standalone cluster, ``spark-submit``).
"""

from __future__ import annotations

import os
import sys

from s3_server import FAKE_CREDENTIALS
from suite_paths import REPO


def spark_environment() -> dict[str, str]:
    """The environment a Spark driver or worker of the tests needs.

    It includes the fake credentials of the local S3 server (tests/s3_server.py):
    Python workers inherit the environment the session started with, so an
    ``s3://`` table read through the shared session later needs them from the start.
    """
    path = os.environ.get("PYTHONPATH", "")
    root = str(REPO)
    parts = [root] + [p for p in path.split(os.pathsep) if p and p != root]
    return {
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(parts),
        **FAKE_CREDENTIALS,
    }
