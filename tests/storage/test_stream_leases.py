"""A client that stalls its streams loses them at the lease, and its slots go back.

A real region server process on loopback (``--lease-timeout 10
--max-scanners-per-client 64``) and a real stalled client process: it
opens 64 streams over one connection, reads one batch of each and stops
reading, so each server handler is left blocked in a gRPC send.  Past the
lease the server cancels those calls (it closes the staller's connection),
so another client on the same host is served again, and the staller,
reading on, gets an error on every stream rather than a short table.

The staller's gRPC channel keeps a fixed flow-control window (BDP probing
off).  With gRPC's default, the client's transport grows its windows from
the round trip of its pings; on a loaded machine the server's pings answer
late, and the staller's gRPC took all 64 streams whole (3.1 GB resident)
without the staller reading one: every handler ended normally before its
lease, so nothing was left to expire and the test failed.  A fixed window
makes "stops reading" hold the server back at once, whatever the load.
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

# The staller speaks the wire protocol (the client's ticket) on a channel of its own, whose
# flow-control window stays fixed (see the module docstring).
_STALLER = textwrap.dedent("""
    import json, sys
    import pyarrow.flight as flight
    import storage
    from storage.server.wire import encode_message
    location, count = sys.argv[1], int(sys.argv[2])
    with storage.connect(location) as conn:
        spec = conn.table("big").scan_request(batch_size=64).to_wire()
    ticket = flight.Ticket(encode_message({"table": "big", "scan": spec}))
    client = flight.FlightClient(location, generic_options=[("grpc.http2.bdp_probe", 0)])
    streams = []
    for _ in range(count):
        reader = client.do_get(ticket)
        streams.append([reader, reader.read_chunk().data.num_rows])
    print("stalled", flush=True)
    sys.stdin.readline()  # the test says when to read on
    outcome = []
    for reader, got in streams:
        try:
            for chunk in reader:
                got += chunk.data.num_rows
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
    # Every stalled stream ends in a transport error, none as a complete-looking short table.
    assert all(kind.startswith("Flight") and got < ROWS for kind, got in outcome), outcome
