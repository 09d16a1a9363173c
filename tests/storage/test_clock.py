"""The engine's clock (storage.clock): one seam for wall-clock and monotonic time.

A manual clock installed by a test is what every thread of the engine reads:
cells written without a timestamp take its time, a TTL expires when it moves
past it (on the batch path, the cell path and point gets alike, and a major
compaction drops what it finds expired), and a reader's pin runs out by it.
Nothing here sleeps.
"""

from __future__ import annotations

import threading
import time

import pytest

import storage
from storage import clock
from storage.region.pins import live_pins, write_pin
from storage.vfs.fs import FileSystem

TTL = 60  # seconds


def test_a_manual_clock_is_seen_by_every_thread_and_the_previous_one_comes_back():
    real = clock.now_ms()
    assert abs(real - time.time() * 1000) < 5_000 and isinstance(real, int)
    seen = []
    with clock.use(clock.ManualClock(now_ms=5_000, monotonic=7.0)) as manual:
        manual.advance(1.5)
        reader = threading.Thread(target=lambda: seen.append((clock.now_ms(), clock.monotonic())))
        reader.start()
        reader.join()
        with clock.use(clock.ManualClock(now_ms=1)):  # blocks nest
            assert clock.now_ms() == 1
        assert (clock.now_ms(), clock.monotonic()) == (6_500, 8.5)
        with pytest.raises(ValueError, match="only moves forward"):
            manual.advance(-1)
    assert seen == [(6_500, 8.5)]
    with pytest.raises(RuntimeError):
        with clock.use(clock.ManualClock(now_ms=2)):
            raise RuntimeError("a failing test body")
    assert abs(clock.now_ms() - time.time() * 1000) < 5_000  # the system clock is back


def test_a_manual_clock_starts_at_the_machine_readings():
    before_ms, before = clock.now_ms(), time.monotonic()
    manual = clock.ManualClock()
    assert before_ms <= manual.now_ms() <= clock.now_ms()
    assert before <= manual.monotonic() <= time.monotonic()


def _visible(table) -> dict[str, set]:
    """The rows each read path sees."""
    return {
        "batch scan": {row for row, _ in table.scan()},
        "cell scan": {row for row, _ in table.scan(path="cell")},
        "get": {row for row in (b"a", b"b") if table.row(row)},
        "arrow batches": {row for b in table.scan_batches() for row in b.column(0).to_pylist()},
    }


def _everywhere(rows: set) -> dict[str, set]:
    return {path: rows for path in ("batch scan", "cell scan", "get", "arrow batches")}


def test_cells_expire_when_the_clock_passes_their_ttl_and_a_major_compaction_drops_them(tmp_path):
    with storage.connect(str(tmp_path / "root")) as conn:
        table = conn.create_table("t", {"f": {"ttl": TTL}}, settings={"wal_sync": "none"})
        with clock.use(clock.ManualClock()) as manual:
            manual.advance(5)  # ahead of the machine's clock, so the stamps below are the manual clock's
            table.put(b"a", {b"f:q": b"1"})  # no timestamp: the clock's time
            with table.batch() as batch:
                batch.put(b"b", {b"f:q": b"2"})
            stamp = manual.now_ms()
            assert table.row(b"a", include_timestamp=True) == {b"f:q": (b"1", stamp)}
            assert table.row(b"b", include_timestamp=True) == {b"f:q": (b"2", stamp)}
            manual.advance(TTL - 1)
            assert _visible(table) == _everywhere({b"a", b"b"})
            table.flush()
            assert _visible(table) == _everywhere({b"a", b"b"})
            manual.advance(2)  # past the TTL: expired, still in the store file
            assert _visible(table) == _everywhere(set())
            assert table.count() == 0
        # the machine's clock is back, well within the TTL of the cells: they are visible
        # again, so the reads above hid them by the clock and dropped nothing
        assert _visible(table) == _everywhere({b"a", b"b"})
        with clock.use(clock.ManualClock(now_ms=stamp)) as manual:
            manual.advance(TTL + 1)
            table.compact(major=True)  # drops what is expired by the clock
        assert _visible(table) == _everywhere(set())  # gone for good, whatever the clock says


def test_a_pin_runs_out_by_the_clock(tmp_path):
    fs = FileSystem(str(tmp_path))
    with clock.use(clock.ManualClock()) as manual:
        pin = write_pin(fs, ["regions/r/f/1.sf"], [], ttl_seconds=30)
        assert pin is not None and [p["files"] for p in live_pins(fs)] == [["regions/r/f/1.sf"]]
        manual.advance(29)
        assert len(live_pins(fs)) == 1
        manual.advance(2)
        assert live_pins(fs) == []
