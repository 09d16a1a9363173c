"""Latency and throughput figures of ``regionscan pe``, and their text report.

Each client records one latency per operation (nanoseconds, from
``time.perf_counter_ns``) into a NumPy array; percentiles are computed with
NumPy over the whole array once the run is over, so recording costs one
array store per operation and nothing else.

The text follows ``hbase pe``'s report: a line per client with its time,
rows and MB/s, its latency line (``Min: ..., Avg: ..., StdDev: ..., 50th:
..., 75th: ..., 95th: ..., 99th: ..., 99.9th: ..., Max: ...``), then a
"Summary of timings (ms)" over the clients and the aggregate figures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

__all__ = ["LatencyStats", "ClientResult", "CommandResult", "latency_stats", "format_latency", "format_command"]

# Percentiles reported, as (JSON field, label in the text report, percentile).
PERCENTILES = (("p50", "50th", 50.0), ("p75", "75th", 75.0), ("p95", "95th", 95.0),
               ("p99", "99th", 99.0), ("p999", "99.9th", 99.9))


@dataclass(frozen=True)
class LatencyStats:
    """Latency summary of a set of operations, in microseconds."""

    count: int
    min: float
    mean: float
    stddev: float
    p50: float
    p75: float
    p95: float
    p99: float
    p999: float
    max: float

    def to_dict(self) -> dict:
        return asdict(self)


def latency_stats(latencies_ns: np.ndarray) -> LatencyStats:
    """Summarize per-operation latencies given in nanoseconds (all zeros when empty)."""
    if latencies_ns.size == 0:
        return LatencyStats(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    us = latencies_ns.astype(np.float64) / 1000.0
    pcts = np.percentile(us, [p for _, _, p in PERCENTILES])
    return LatencyStats(
        int(us.size), float(us.min()), float(us.mean()), float(us.std()),
        *(float(v) for v in pcts), float(us.max()),
    )


@dataclass
class ClientResult:
    """What one client (thread) did for one command.

    ``ops`` operations were timed into ``latencies_ns``; ``rows`` rows and
    ``nbytes`` bytes (keys plus values) were read or written between its
    first and last operation, ``elapsed_ns`` apart.
    """

    client: int
    start_row: int
    ops: int
    rows: int
    nbytes: int
    elapsed_ns: int
    latencies_ns: np.ndarray = field(repr=False)

    @property
    def elapsed_s(self) -> float:
        return self.elapsed_ns / 1e9

    def rows_per_s(self) -> float:
        return self.rows / self.elapsed_s if self.elapsed_ns > 0 else 0.0

    def mb_per_s(self) -> float:
        return self.nbytes / 1e6 / self.elapsed_s if self.elapsed_ns > 0 else 0.0

    def ops_per_s(self) -> float:
        return self.ops / self.elapsed_s if self.elapsed_ns > 0 else 0.0

    def to_dict(self) -> dict:
        return {
            "client": self.client,
            "start_row": self.start_row,
            "ops": self.ops,
            "rows": self.rows,
            "bytes": self.nbytes,
            "elapsed_ms": self.elapsed_ns / 1e6,
            "ops_per_s": self.ops_per_s(),
            "rows_per_s": self.rows_per_s(),
            "mb_per_s": self.mb_per_s(),
            "latency_us": latency_stats(self.latencies_ns).to_dict(),
        }


@dataclass
class CommandResult:
    """One command over all its clients; ``wall_ns`` spans the first start to the last end."""

    command: str
    test_name: str
    clients: list[ClientResult]
    wall_ns: int
    notes: list[str] = field(default_factory=list)

    @property
    def ops(self) -> int:
        return sum(c.ops for c in self.clients)

    @property
    def rows(self) -> int:
        return sum(c.rows for c in self.clients)

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.clients)

    def latency(self) -> LatencyStats:
        """Latency over every operation of every client."""
        arrays = [c.latencies_ns for c in self.clients]
        return latency_stats(np.concatenate(arrays) if arrays else np.empty(0, np.int64))

    def _rate(self, amount: float) -> float:
        return amount / (self.wall_ns / 1e9) if self.wall_ns > 0 else 0.0

    def to_dict(self) -> dict:
        timings = [c.elapsed_ns / 1e6 for c in self.clients]
        return {
            "command": self.command,
            "test": self.test_name,
            "clients": [c.to_dict() for c in self.clients],
            "aggregate": {
                "clients": len(self.clients),
                "ops": self.ops,
                "rows": self.rows,
                "bytes": self.nbytes,
                "wall_ms": self.wall_ns / 1e6,
                "timings_ms": timings,
                "ops_per_s": self._rate(self.ops),
                "rows_per_s": self._rate(self.rows),
                "mb_per_s": self._rate(self.nbytes / 1e6),
                "latency_us": self.latency().to_dict(),
            },
            "notes": list(self.notes),
        }


def _num(value: float) -> str:
    # Two decimals below 100 us keep sub-microsecond differences visible;
    # above that whole microseconds read better.
    return f"{value:.2f}" if value < 100 else f"{value:,.0f}"


def format_latency(stats: LatencyStats) -> str:
    """One line in hbase pe's order: Min, Avg, StdDev, the percentiles, Max (microseconds)."""
    parts = [f"Min: {_num(stats.min)}", f"Avg: {_num(stats.mean)}", f"StdDev: {_num(stats.stddev)}"]
    parts += [f"{label}: {_num(getattr(stats, name))}" for name, label, _ in PERCENTILES]
    parts.append(f"Max: {_num(stats.max)}")
    return ", ".join(parts)


def format_command(result: CommandResult) -> str:
    """The full text report of one command: per client, then the summary."""
    name = result.test_name
    lines = []
    for c in result.clients:
        lines.append(
            f"[{name}] client {c.client}: finished in {c.elapsed_ns / 1e6:,.0f}ms at offset {c.start_row} "
            f"for {c.ops:,} ops, {c.rows:,} rows ({c.rows_per_s():,.0f} rows/s, {c.mb_per_s():.2f} MB/s)"
        )
        lines.append(f"[{name}] client {c.client}: Latency (us) {format_latency(latency_stats(c.latencies_ns))}")
    timings = [round(c.elapsed_ns / 1e6) for c in result.clients]
    lines.append(f"[{name}] Summary of timings (ms): {timings}")
    lines.append(
        f"[{name}] duration\tMin: {min(timings)}ms\tMax: {max(timings)}ms\tAvg: {round(sum(timings) / len(timings))}ms"
    )
    agg = result.to_dict()["aggregate"]
    lines.append(
        f"[{name}] aggregate over {len(result.clients)} client(s): {result.ops:,} ops, {result.rows:,} rows "
        f"in {result.wall_ns / 1e9:.3f}s wall: {agg['ops_per_s']:,.0f} ops/s, {agg['rows_per_s']:,.0f} rows/s, "
        f"{agg['mb_per_s']:.2f} MB/s"
    )
    lines.append(f"[{name}] Latency (us) {format_latency(result.latency())}")
    for note in result.notes:
        lines.append(f"[{name}] note: {note}")
    return "\n".join(lines)
