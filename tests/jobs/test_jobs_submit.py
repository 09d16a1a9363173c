"""spark-submit runs of the jobs against a real standalone Spark master and worker on 127.0.0.1.

The daemons, ``org.apache.spark.deploy.master.Master`` and ``...worker.Worker`` started with
pyspark's own ``bin/spark-class``, are the jobs tests' shared ``standalone`` fixture
(tests/jobs/conftest.py); the test submits job scripts with
``bin/spark-submit`` (the repository is *not* on the executors' Python path:
the jobs ship their packages themselves) and checks exit codes and output.
"""

from __future__ import annotations

import shutil

import pytest

import storage
from jobs.demo import load_sample_table
from standalone_spark import cluster_environment, submit_job

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(standalone):
    """The suite's standalone master and worker (2 cores) on loopback: its URL, and the environment
    spark-submit runs with."""
    url, _daemons, base = standalone
    return url, cluster_environment(base)


_BANNER = {"SparkContext: Running Spark version", "SparkContext: OS info", "SparkContext: Java version"}


def _info_lines(stderr: str) -> set[str]:
    """The INFO lines of a log after their time stamp; a banner line as its _BANNER entry."""
    found = set()
    for line in stderr.splitlines():
        if " INFO " in line:
            text = line.split(" INFO ", 1)[1]
            found.add(next((b for b in _BANNER if text.startswith(b)), text))
    return found


def test_row_counter_and_main_job_through_spark_submit(cluster, tmp_path):
    root = str(tmp_path / "tables")
    conn = storage.connect(root)
    load_sample_table(conn, "sample", 3000, 3).flush()
    conn.close()

    ok = submit_job(cluster, "row_counter.py", "--root", root, "sample", "--range", ",\\x00\\x00\\x03\\xE8",
                    "--expected-count", "1000")
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-3000:]
    assert "ROWS=1000" in ok.stdout
    # spark-submit starts its driver JVM logging at INFO; the job sets spark.log.level, which Spark
    # applies once it has named its version: those three lines, none of the ~40 start-up lines after
    assert _info_lines(ok.stderr) <= _BANNER, ok.stderr[-3000:]
    assert "1 task(s)" in ok.stdout  # only the first region holds the range: one split, one task

    main = submit_job(cluster, "main_job.py", "--root", root, "--rows", "3000", "--regions", "3",
                      "--profile-rows", "1000")
    assert main.returncode == 0, main.stdout[-3000:] + main.stderr[-3000:]
    assert _info_lines(main.stderr) <= _BANNER, main.stderr[-3000:]
    assert "3 partition(s) for 3 region(s)" in main.stdout
    assert "ok: Spark's answers match" in main.stdout
    assert "start Spark (spark://127.0.0.1:" in main.stdout
    assert "hotspots: vectorized" in main.stdout
    shutil.rmtree(root, ignore_errors=True)
