"""The Thrift gateway's scanner registry: leases, caps, ownership and read-ahead, in process.

A manual clock (storage.clock) drives the leases; a counting generator stands for an engine
scan, so the tests see when its rows are read and when it is closed.
"""

from __future__ import annotations

import pytest

from storage import clock
from storage.thrift.errors import GatewayIllegalArgument, GatewayIOError
from storage.thrift.scanners import ScannerRegistry


class Scan:
    """A generator of ``n`` rows that records how many were read and whether it was closed."""

    def __init__(self, n: int):
        self.read = 0
        self.closed = False
        self.rows = self._rows(n)

    def _rows(self, n):
        try:
            for i in range(n):
                self.read += 1
                yield i
        finally:
            self.closed = True


@pytest.mark.parametrize("prefetch", [0, 2])
def test_take_in_any_sizes_returns_every_row_once(prefetch):
    reg = ScannerRegistry(60, 10, 10, prefetch_workers=prefetch)
    scan = Scan(25)
    sid = reg.open(1, "t", scan.rows)
    got = []
    for n in (3, 1, 7, 2, 100, 5):
        s = reg.get(1, sid)
        with s.lock:
            got += s.take(n)
    assert got == list(range(25))
    assert scan.closed
    reg.close(1, sid)
    reg.stop()


def test_read_ahead_reads_the_next_batch_and_close_waits_for_it():
    reg = ScannerRegistry(60, 10, 10, prefetch_workers=1)
    scan = Scan(100)
    sid = reg.open(1, "t", scan.rows)
    s = reg.get(1, sid)
    with s.lock:
        assert s.take(10) == list(range(10))
    s._ahead.result(timeout=10)  # the read-ahead of the next 10 rows
    assert scan.read == 20
    with s.lock:
        assert s.take(4) == list(range(10, 14))  # 6 read-ahead rows are carried, none re-read
        assert s.take(6) == list(range(14, 20))
    reg.close(1, sid)
    assert scan.closed and scan.read <= 30
    with pytest.raises(GatewayIllegalArgument, match="unknown on this connection"):
        reg.get(1, sid)
    reg.stop()


def test_a_failed_read_ahead_fails_the_next_call():
    def broken():
        yield 1
        yield 2
        raise OSError("disk went away")

    reg = ScannerRegistry(60, 10, 10, prefetch_workers=1)
    sid = reg.open(1, "t", broken())
    s = reg.get(1, sid)
    with s.lock:
        assert s.take(2) == [1, 2]
        with pytest.raises(OSError, match="disk went away"):
            s.take(2)
    reg.stop()


def test_leases_caps_and_ownership():
    with clock.use(clock.ManualClock()) as manual:
        reg = ScannerRegistry(5, 2, 3)
        scans = [Scan(10) for _ in range(4)]
        a = reg.open(1, "t", scans[0].rows)
        b = reg.open(1, "t", scans[1].rows)
        with pytest.raises(GatewayIOError, match="on this connection"):
            reg.check_room(1)
        c = reg.open(2, "u", scans[2].rows)
        with pytest.raises(GatewayIOError, match="in the gateway"):
            reg.open(3, "t", scans[3].rows)
        with pytest.raises(GatewayIllegalArgument, match="unknown on this connection"):
            reg.get(2, a)
        manual.advance(4)
        reg.get(1, a)  # renews a's lease
        manual.advance(2)
        assert reg.reap() == 2  # b and c idle for 6 s > 5
        with pytest.raises(GatewayIllegalArgument, match=f"scanner {b} is closed: expired after 5 s idle"):
            reg.get(1, b)
        assert reg.count() == 1
        reg.close_table("t", "table t was disabled")
        with pytest.raises(GatewayIllegalArgument, match="table t was disabled"):
            reg.get(1, a)
        e = reg.open(5, "u", Scan(3).rows)
        manual.advance(6)  # no reaper ran: the next call finds it stale
        with pytest.raises(GatewayIllegalArgument, match=f"scanner {e} is closed: expired after 5 s idle"):
            reg.get(5, e)
        d = reg.open(4, "u", scans[3].rows)
        reg.close_connection(4)
        with pytest.raises(GatewayIllegalArgument, match="unknown"):
            reg.get(4, d)
        assert reg.count() == 0 and a < b < c < e < d
        reg.stop()
