"""ServerProcess children stop when the process that started them ends, even
when it is killed: a killed test run or script leaves no server behind."""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import os
import signal
import subprocess
import sys
import time


import storage
from storage.server.process import ServerProcess

_PARENT = r"""
import sys, time
from storage.server.process import ServerProcess
server = ServerProcess(sys.argv[1])
gateway = ServerProcess(sys.argv[1], "--read-only", module="storage.thrift")
print(server.proc.pid, gateway.proc.pid, server.location, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by init) has stopped serving too; /proc tells, where it exists
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return not os.path.exists("/proc/self")  # gone meanwhile, or no /proc: the kernel said alive


def test_servers_stop_when_their_parent_is_killed(tmp_path):
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {}}).put(b"r", {b"cf:a": b"1"})
    here = str(paths.REPO)
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, root], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": here})
    try:
        server_pid, gateway_pid, location = parent.stdout.readline().split()
        with storage.connect(location) as remote:  # serving while the parent lives
            assert remote.table("t").row(b"r") == {b"cf:a": b"1"}
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (_alive(int(server_pid)) or _alive(int(gateway_pid))):
            time.sleep(0.1)
        assert not _alive(int(server_pid)) and not _alive(int(gateway_pid))
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_stop_still_stops_the_server_and_reports_its_status(tmp_path):
    server = ServerProcess(str(tmp_path / "root"))
    with storage.connect(server.location) as remote:
        assert remote.tables() == []
    assert server.stop() == 0
    assert "region server stopped" in "".join(server.output)
