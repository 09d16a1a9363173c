"""A client that stalls its streams loses them at the lease, and its slots go back.

A real region server process on loopback (``--lease-timeout 10
--max-scanners-per-client 64``) and a real stalled client process: it
opens 64 streams over one connection, reads one batch of each and stops
reading, so each server handler is left blocked in a gRPC send.  Past the
lease the server cancels those calls (it closes the staller's connection),
so another client on the same host is served again, and the staller,
reading on, gets an error on every stream rather than a short table.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

import storage
from storage.server import LimitExceeded
from storage.server.process import ServerProcess

# Long enough that all 64 streams are still leased when the other client asks on a busy
# machine (at 3 s the first streams' leases could run out before the last opened); the test
# then waits for the expiry with a deadline, not a fixed sleep.
LEASE = 10
PER_CLIENT = 64
ROWS = 4000

_STALLER = textwrap.dedent("""
    import json, sys
    import storage
    conn = storage.connect(sys.argv[1])
    table = conn.table("big")
    streams = []
    for _ in range(int(sys.argv[2])):
        stream = table.scan_batches(mode="stream", batch_size=64)
        got = next(stream).num_rows
        streams.append([stream, got])
    print("stalled", flush=True)
    sys.stdin.readline()  # the test says when to read on
    outcome = []
    for stream, got in streams:
        try:
            for batch in stream:
                got += batch.num_rows
            outcome.append(["complete", got])
        except Exception as exc:
            outcome.append([type(exc).__name__, got])
    print(json.dumps(outcome), flush=True)
""")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("leases") / "root")
    with storage.connect(root) as conn:
        big = conn.create_table("big", {"f": {}}, settings={"wal_sync": "none"})
        # 48 MB: more than gRPC's and the front door's buffers hold for a stream nobody reads
        # (at 16 MB a stream sometimes fit in them whole, its handler finished and freed a slot)
        with big.batch() as b:
            for i in range(ROWS):
                b.put(b"row%05d" % i, {b"f:v": b"%04d" % i * 3000})
        big.flush()
    return root


def test_stalled_streams_are_cancelled_at_the_lease_and_their_slots_freed(root):
    with ServerProcess(root, "--lease-timeout", str(LEASE), "--max-scanners-per-client", str(PER_CLIENT)) as srv:
        staller = subprocess.Popen([sys.executable, "-c", _STALLER, srv.location, str(PER_CLIENT)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert staller.stdout.readline().strip() == "stalled"
            stalled_at = time.monotonic()
            other = storage.connect(srv.location)  # another client on the same host
            with pytest.raises(LimitExceeded, match="max_scanners_per_client=64"):
                next(other.table("big").scan_batches(mode="stream"))
            # Past the lease the host's slots are free again: asked until then, with a deadline.
            time.sleep(max(0.0, stalled_at + LEASE - time.monotonic()))
            deadline = stalled_at + LEASE + 30
            while True:
                info = other.list_scanners()
                if (not info["streams"] and not info["draining_streams"]) or time.monotonic() > deadline:
                    break
                time.sleep(0.25)
            assert not info["streams"] and not info["draining_streams"], {k: v if "total" in k else len(v)
                                                                          for k, v in info.items()}
            assert sum(b.num_rows for b in other.table("big").scan_batches(mode="stream")) == ROWS
            info = other.list_scanners()
            assert info["streams"] == [] and info["draining_streams"] == []
            assert info["streams_expired_total"] == PER_CLIENT and info["connections_cancelled_total"] >= 1
            other.close()
            out, _ = staller.communicate("go\n", timeout=60)
        finally:
            if staller.poll() is None:
                staller.kill()
                staller.wait()
    outcome = json.loads(out.strip().splitlines()[-1])
    assert len(outcome) == PER_CLIENT
    # Every stalled stream ends in an error, none as a complete-looking short table.
    assert all(kind != "complete" and got < ROWS for kind, got in outcome), outcome
