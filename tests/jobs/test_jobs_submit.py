"""spark-submit runs of the jobs against a real standalone Spark master and worker on 127.0.0.1.

The test starts ``org.apache.spark.deploy.master.Master`` and ``...worker.Worker``
with pyspark's own ``bin/spark-class``, submits job scripts with
``bin/spark-submit`` (the repository is *not* on the executors' Python path:
the jobs ship their packages themselves), checks exit codes and output, and
stops both daemons by PID.
"""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

import storage
from jobs.demo import load_sample_table

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = str(paths.REPO)


def _spark_home() -> str:
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, log: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"Spark daemon exited with {proc.returncode}:\n{open(log).read()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise RuntimeError(f"port {port} did not open:\n{open(log).read()[-3000:]}")


def _wait_text(path: str, text: str, proc: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if os.path.exists(path) and text in open(path).read():
            return
        time.sleep(0.5)
    raise RuntimeError(f"{text!r} never appeared in {path}:\n{open(path).read()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


@contextlib.contextmanager
def standalone_cluster(base, env: dict):
    """A standalone master and one worker (2 cores) on loopback started with ``env``; yields the master URL."""
    home = _spark_home()
    spark_class = os.path.join(home, "bin", "spark-class")
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    master_log, worker_log = str(base / "master.log"), str(base / "worker.log")
    master = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(ui)],
        env=env, stdout=open(master_log, "w"), stderr=subprocess.STDOUT,
    )
    worker = None
    try:
        _wait_port(port, master, master_log)
        url = f"spark://127.0.0.1:{port}"
        worker = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "2",
             "--memory", "1g", "--webui-port", str(worker_ui), "--work-dir", str(base / "work")],
            env=env, stdout=open(worker_log, "w"), stderr=subprocess.STDOUT,
        )
        _wait_text(master_log, "Registering worker", master)
        yield url
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)


def cluster_environment(base) -> dict:
    """The environment of the daemons and of spark-submit: this one, without the repository on PYTHONPATH."""
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": _spark_home(),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_WORKER_DIR": str(base / "work"),
    })
    # the executors must get the project's code from the job itself, not from the environment
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                        if p and os.path.abspath(p) != REPO)
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master and one worker (2 cores) on loopback; yields the master URL and env."""
    base = tmp_path_factory.mktemp("standalone")
    env = cluster_environment(base)
    with standalone_cluster(base, env) as url:
        yield url, env


def _submit(cluster, script: str, *args: str) -> subprocess.CompletedProcess:
    url, env = cluster
    submit = os.path.join(_spark_home(), "bin", "spark-submit")
    cmd = [submit, "--master", url, "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
           os.path.join(REPO, "jobs", script), *args]
    return subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)


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

    ok = _submit(cluster, "row_counter.py", "--root", root, "sample", "--range", ",\\x00\\x00\\x03\\xE8",
                 "--expected-count", "1000")
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-3000:]
    assert "ROWS=1000" in ok.stdout
    # spark-submit starts its driver JVM logging at INFO; the job sets spark.log.level, which Spark
    # applies once it has named its version: those three lines, none of the ~40 start-up lines after
    assert _info_lines(ok.stderr) <= _BANNER, ok.stderr[-3000:]
    assert "1 task(s)" in ok.stdout  # only the first region holds the range: one split, one task

    main = _submit(cluster, "main_job.py", "--root", root, "--rows", "3000", "--regions", "3",
                   "--profile-rows", "1000")
    assert main.returncode == 0, main.stdout[-3000:] + main.stderr[-3000:]
    assert _info_lines(main.stderr) <= _BANNER, main.stderr[-3000:]
    assert "3 partition(s) for 3 region(s)" in main.stdout
    assert "ok: Spark's answers match" in main.stdout
    assert "start Spark (spark://127.0.0.1:" in main.stdout
    assert "hotspots: vectorized" in main.stdout
    shutil.rmtree(root, ignore_errors=True)
