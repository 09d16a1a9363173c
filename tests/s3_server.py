"""A local S3-compatible server (moto's server mode) for tests and benchmarks.

``S3Server`` starts ``python -m moto.server`` on 127.0.0.1 with a free port
in a child process (its own interpreter, so it does not compete with the
test for the GIL), waits until it answers, and stops it by its PID.  The
credentials it accepts are any; tests export fake ones in the environment,
where pyarrow, boto3 and every child process (Spark executors included) pick
them up.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

__all__ = ["S3Server", "FAKE_CREDENTIALS"]

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """moto in server mode on loopback; ``start()``, ``root(...)``, ``stop()``."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self._proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> "S3Server":
        os.environ.update(FAKE_CREDENTIALS)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {self._proc.returncode}")
            try:
                urllib.request.urlopen(f"http://{self.endpoint}/moto-api/", timeout=1).read()
                return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"moto server did not answer on {self.endpoint} within {timeout} s")

    def client(self):
        """A boto3 S3 client for the server."""
        import boto3

        return boto3.client("s3", endpoint_url=f"http://{self.endpoint}", region_name="us-east-1")

    def new_bucket(self) -> str:
        name = f"t-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def root(self, prefix: str = "data", bucket: str | None = None, **params) -> str:
        """An ``s3://`` root in a new (or the given) bucket; ``params`` become URI parameters."""
        query = {"endpoint_override": self.endpoint, "scheme": "http", "region": "us-east-1", **params}
        args = "&".join(f"{k}={v}" for k, v in query.items())
        return f"s3://{bucket or self.new_bucket()}/{prefix}?{args}"

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
