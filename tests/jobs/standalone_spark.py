"""A standalone Spark master and worker on 127.0.0.1, and ``spark-submit`` runs against them.

The daemons are pyspark's own ``bin/spark-class`` processes, started with the environment
the caller gives and stopped by PID; jobs are the repository's ``jobs/*.py`` scripts.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places

REPO = str(paths.REPO)


def spark_home() -> str:
    """pyspark's installation: its ``bin/spark-class`` and ``bin/spark-submit``."""
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
    home = spark_home()
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
        "SPARK_HOME": spark_home(),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_WORKER_DIR": str(base / "work"),
    })
    # the executors must get the project's code from the job itself, not from the environment
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                        if p and os.path.abspath(p) != REPO)
    return env


def submit_job(cluster: tuple[str, dict], script: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``jobs/<script>`` through ``spark-submit`` on ``cluster`` (its master URL and environment)."""
    url, env = cluster
    submit = os.path.join(spark_home(), "bin", "spark-submit")
    cmd = [submit, "--master", url, "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
           os.path.join(REPO, "jobs", script), *args]
    return subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
