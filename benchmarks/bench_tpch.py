"""TPC-H's 22 queries through Spark SQL on regionscan tables, against the same data in Parquet.

The data comes from ``tpchgen-cli`` (the ``bench`` extra) as Parquet at ``--scale``, kept under
``--data-dir`` and reused when there.  Each table is loaded as a user would load it:
``spark.read.parquet(...)`` then ``df.write.format("regionscan")`` with the JSON catalog of
``benchmarks/tpch`` (binary SerDe, every column with its Spark type, the primary key as an
ordered row key, composite for lineitem and partsupp), created with ``newtable`` regions and
never compacted.  The Parquet files are the other side.

Every query runs through Spark SQL (``local[--cores]``) on both sides: a first run with a
fresh engine worker (its process started anew, nothing in its block cache, the files in the
OS page cache; the JVM alike for both sides: one untimed run of the query on each side before
it, so neither first run pays Spark's compilation of the query for the other, and the sides
take turns going first), ``--warmups`` warm-up runs, then the best of ``--repeat`` (wall seconds, the
sides alternating).  Every answer is compared (row count and values, decimals exact, doubles
to 1e-9 relative, in order where the query orders).  Per query it prints the times, Parquet's
time over ours (above 1 we are faster), the engine worker's CPU seconds and the driver JVM's
(local mode: the executors' too) per timed run, the Arrow bytes and rows the worker sent, and
the worker's peak resident memory (``VmHWM``); then the geometric means and the worst query.
``--json`` also keeps the first runs' CPU seconds (the worker's, and the JVM's per side).
``--py-spy DIR`` records the worker's timed runs with py-spy (``DIR/qNN.txt``: collapsed stacks;
the top functions are printed); ``--py-spy-first DIR`` the fresh worker during the first runs
(``DIR/qNN_first.txt``).

    python benchmarks/bench_tpch.py                     # SF 0.1, all 22 queries
    python benchmarks/bench_tpch.py --scale 1 --queries 1,6
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Callable

from harness import process_cpu_seconds, spark_session

from benchmarks import tpch
from benchmarks.tpch.queries import parse_query_list

SIDES = ("regionscan", "parquet")


def _say(text: str) -> None:
    print(text, flush=True)


# -- the data ------------------------------------------------------------------------------
def _tpchgen() -> str:
    found = shutil.which("tpchgen-cli") or os.path.join(os.path.dirname(sys.executable), "tpchgen-cli")
    if not os.path.exists(found):
        raise SystemExit("tpchgen-cli is not installed: python3 -m pip install -e '.[bench]'")
    return found


def generate(data_dir: str, scale: float) -> str:
    """The Parquet files of the eight tables at ``scale`` (made by tpchgen-cli unless there)."""
    parquet = os.path.join(data_dir, "parquet")
    marker = os.path.join(data_dir, "parquet.complete")
    if os.path.exists(marker):
        return parquet
    shutil.rmtree(parquet, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run([_tpchgen(), "parquet", "--scale-factor", str(scale), "--output-dir", parquet], check=True)
    open(marker, "w").write(f"tpchgen-cli parquet SF {scale}\n")
    _say(f"generated SF {scale} in Parquet in {time.perf_counter() - started:.1f} s")
    return parquet


def _parquet_path(parquet: str, table: str) -> str:
    return os.path.join(parquet, f"{table}.parquet")


def _size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(base, f)) for base, _, files in os.walk(path) for f in files)


def load(spark: Any, data_dir: str, parquet: str, reload: bool) -> str:
    """The regionscan root holding the eight tables, loaded from ``parquet`` unless there."""
    import pyarrow.parquet as pq

    root = os.path.join(data_dir, "regionscan")
    marker = os.path.join(data_dir, "regionscan.loaded")
    if os.path.exists(marker) and not reload:
        _say(f"reusing the tables under {root} ({open(marker).read().strip()}; --reload to load again)")
        return root
    shutil.rmtree(root, ignore_errors=True)
    if os.path.exists(marker):
        os.remove(marker)
    total = 0.0
    for table in tpch.TABLES:
        path = _parquet_path(parquet, table)
        rows = pq.ParquetFile(path).metadata.num_rows
        started = time.perf_counter()
        tpch.write_regionscan(spark.read.parquet(path), root, table, rows)
        took = time.perf_counter() - started
        total += took
        _say(f"  loaded {table:<9} {rows:>10,} rows in {tpch.regions_for(rows)} regions in {took:6.1f} s: "
             f"{_size(os.path.join(root, table)) / 2**20:7.1f} MiB (Parquet {_size(path) / 2**20:6.1f} MiB)")
    open(marker, "w").write(f"loaded {time.strftime('%Y-%m-%d %H:%M')} in {total:.0f} s")
    return root


# -- the session and the engine worker ------------------------------------------------------
def session(cores: int, driver_memory: str, conf: dict[str, str] | None = None) -> Any:
    """A local Spark session with the JVM regionscan source (UTC session time zone, as the
    TPC-H dates are read; ``conf``: more Spark settings, e.g. the JVM read timeline); exits in
    one line when the JVM source could not be built."""
    from connector.session import jvm_source_loaded

    spark = spark_session("bench_tpch", cores, driver_memory, {"spark.sql.session.timeZone": "UTC", **(conf or {})})
    if not jvm_source_loaded(spark):
        spark.stop()
        raise SystemExit("the JVM regionscan source could not be built (javac's error is above): this benchmark "
                         "measures it and its engine worker")
    return spark


def _peak_rss(pid: int) -> int:
    """The peak resident bytes of process ``pid`` (VmHWM), 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Worker:
    """This session's engine worker, seen from outside: its pid, counters, CPU and memory."""

    def __init__(self, spark: Any):
        self.jvm = spark._jvm.regionscan.spark.WorkerProcess
        self.jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())

    def stats(self) -> dict:
        """The worker's counters (starting one when none runs)."""
        return json.loads(self.jvm.statsJson(sys.executable, ""))

    def pid(self) -> int:
        return int(self.jvm.currentPid())

    def fresh(self) -> dict:
        """End the running worker and start a new one (nothing cached in it); its stats."""
        pid = self.pid()
        if pid > 0:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while self.pid() == pid and time.monotonic() < deadline:  # until the JVM has seen it end
                time.sleep(0.05)
        return self.stats()


# -- the queries ----------------------------------------------------------------------------
def _frames(spark: Any, root: str, parquet: str, options: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {"regionscan": {t: tpch.read_regionscan(spark, root, t, options=options) for t in tpch.TABLES},
            "parquet": {t: spark.read.parquet(_parquet_path(parquet, t)) for t in tpch.TABLES}}


class Profiler:
    """py-spy on the engine worker while a query's timed runs go: collapsed stacks per query."""

    def __init__(self, out_dir: str | None, suffix: str = ""):
        self.out_dir = out_dir
        self.suffix = suffix  # "_first": the first runs' profile, beside the timed runs' in the same DIR
        self.exe = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
        self.proc: subprocess.Popen | None = None
        self.path = ""
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)

    def start(self, pid: int, number: int) -> None:
        if not self.out_dir or pid <= 0:
            return
        self.path = os.path.join(self.out_dir, f"q{number:02d}{self.suffix}.txt")
        self.proc = subprocess.Popen([self.exe, "record", "--pid", str(pid), "--format", "raw", "--rate", "200",
                                      "--output", self.path, "--nonblocking", "--threads"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> str:
        if self.proc is None:
            return ""
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        self.proc = None
        if not os.path.exists(self.path):
            return f"py-spy wrote nothing: {err.decode(errors='replace').strip().splitlines()[-1:]}"
        return _top_functions(self.path)


_WAITING = ("(selectors.py)", "wait (threading.py)", "sleep (", "acquire (", "<idle>")


def _top_functions(path: str, count: int = 12) -> str:
    """The functions with the most samples on top of the stack (self) in a collapsed-stack file."""
    own: collections.Counter = collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, samples = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            n = int(samples)
            total += n
            top = re.sub(r":\d+\)$", ")", frames[-1])  # one line per function, not per source line
            if any(w in top for w in _WAITING):
                own["(waiting: select, sleep, lock)"] += n
                continue
            own[top] += n
    lines = [f"      {n / total:6.1%}  {name}" for name, n in own.most_common(count)]
    return f"    py-spy, {total} samples (self time, every thread; {path}):\n" + "\n".join(lines)


def run_query(spark: Any, worker: Worker, frames: dict, number: int, warmups: int, repeat: int,
              profiler: Profiler, cold_query: bool = False, first_profiler: Profiler | None = None) -> dict:
    """One query on both sides: the first run (fresh worker; the query compiled by Spark for both
    sides unless ``cold_query``; profiled by ``first_profiler`` when given), warm-ups, the best of
    ``repeat``."""
    text = tpch.query_text(number)

    def side(name: str) -> Callable[[], list]:
        def run() -> list:
            tpch.register_views(frames[name])
            return spark.sql(text).collect()
        return run

    fns = {name: side(name) for name in SIDES}
    row: dict[str, Any] = {"query": number}
    # First runs, measured alike on both sides. The side that runs a query first pays Spark's
    # compilation of it (whole-stage code generation, shared by the stages both plans have) and
    # the other side then finds it done: ours, always first, paid 1-2 s of Parquet's first run.
    # So each side runs the query once untimed (the JVM then holds both plans' code, as for the
    # timed runs), the worker is started anew (nothing in its block cache, the files in the OS
    # page cache) and the sides take turns going first.  --cold-query-first skips the untimed
    # runs: the first side then also pays the query's compilation.
    if not cold_query:
        for name in SIDES:
            fns[name]()
    started = time.perf_counter()
    before = worker.fresh()
    row["worker_start_s"] = time.perf_counter() - started  # end the old worker, start one, its first answer
    row["worker_warm_up_s"] = before.get("warm_up_s")
    pid = before["pid"]
    answers = {}
    if first_profiler is not None:
        first_profiler.start(pid, number)
    for name in (SIDES if number % 2 else SIDES[::-1]):
        gc.collect()
        c0 = process_cpu_seconds(worker.jvm_pid)
        started = time.perf_counter()
        answers[name] = fns[name]()
        row[f"{name}_first_s"] = time.perf_counter() - started
        row[f"{name}_first_jvm_cpu_s"] = process_cpu_seconds(worker.jvm_pid) - c0
    row["first_profile"] = first_profiler.stop() if first_profiler is not None else ""
    after_first = worker.stats()
    row["worker_first_cpu_s"] = after_first["cpu_s"] - before["cpu_s"]
    for _ in range(warmups):
        for name in SIDES:
            fns[name]()
    best = {name: math.inf for name in SIDES}
    jvm_cpu = {name: 0.0 for name in SIDES}
    warm_before = worker.stats()
    profiler.start(pid, number)
    for _ in range(repeat):
        for name in SIDES:
            gc.collect()
            c0 = process_cpu_seconds(worker.jvm_pid)
            started = time.perf_counter()
            answer = fns[name]()
            took = time.perf_counter() - started
            jvm_cpu[name] += process_cpu_seconds(worker.jvm_pid) - c0
            if took < best[name]:
                best[name], answers[f"{name}_warm"] = took, answer
    row["profile"] = profiler.stop()
    warm_after = worker.stats()
    if warm_after["pid"] != pid:
        raise RuntimeError(f"q{number}: the engine worker was restarted during the timed runs (pid {pid} -> "
                           f"{warm_after['pid']}): see its log under the temp directory")
    ordered = tpch.is_ordered(number)
    problems = [d for d in (tpch.answer_difference(answers[f"{s}"], answers["parquet"], ordered) for s in
                            ("regionscan", "regionscan_warm", "parquet_warm")) if d]
    row.update({
        "rows": len(answers["parquet"]), "answer": "equal" if not problems else f"DIFFERS: {problems[0]}",
        "regionscan_s": best["regionscan"], "parquet_s": best["parquet"],
        "ratio": best["parquet"] / best["regionscan"],
        "first_ratio": row["parquet_first_s"] / row["regionscan_first_s"],
        "worker_cpu_s": (warm_after["cpu_s"] - warm_before["cpu_s"]) / repeat,
        "jvm_cpu_s": jvm_cpu["regionscan"] / repeat, "parquet_jvm_cpu_s": jvm_cpu["parquet"] / repeat,
        "bytes_sent": (warm_after["counters"].get("bytes_sent", 0) - warm_before["counters"].get("bytes_sent", 0))
        // repeat,
        "rows_sent": (warm_after["counters"].get("rows_sent", 0) - warm_before["counters"].get("rows_sent", 0))
        // repeat,
        "scan": {k: (v - warm_before["scan"].get(k, 0)) / repeat for k, v in warm_after["scan"].items()
                 if isinstance(v, (int, float))},
        "worker_peak_rss": _peak_rss(pid),
        "block_cache": warm_after.get("block_cache", {}),
    })
    return row


HEAD = (f"  {'q':>3} {'rows':>5} {'ours first':>10} {'pq first':>8} {'ratio':>6}  {'ours':>7} {'parquet':>7} {'ratio':>6}"
        f"  {'worker':>7} {'JVM':>6} {'pq JVM':>6} {'MB sent':>8} {'peak RSS':>9}  answer")


def _line(r: dict) -> str:
    return (f"  q{r['query']:02d} {r['rows']:>5} {r['regionscan_first_s']:9.2f}s {r['parquet_first_s']:7.2f}s "
            f"{r['first_ratio']:5.2f}x  {r['regionscan_s']:6.2f}s {r['parquet_s']:6.2f}s {r['ratio']:5.2f}x"
            f"  {r['worker_cpu_s']:6.2f}s {r['jvm_cpu_s']:5.2f}s {r['parquet_jvm_cpu_s']:5.2f}s "
            f"{r['bytes_sent'] / 1e6:8.1f} {r['worker_peak_rss'] / 2**20:7.0f}Mi  {r['answer']}")


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summary(rows: list[dict]) -> dict:
    """Geometric means, the worst query, the peak memory and how many answers were equal."""
    worst = min(rows, key=lambda r: r["ratio"])
    worst_first = min(rows, key=lambda r: r["first_ratio"])
    return {"geomean": _geomean([r["ratio"] for r in rows]),
            "first_geomean": _geomean([r["first_ratio"] for r in rows]),
            "worst": (worst["query"], worst["ratio"]), "worst_first": (worst_first["query"], worst_first["first_ratio"]),
            "equal": sum(r["answer"] == "equal" for r in rows), "queries": len(rows),
            "worker_peak_rss": max(r["worker_peak_rss"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor (1: SF 1, 6M lineitem rows)")
    parser.add_argument("--queries", default="1-22", help="which queries, e.g. 1,6 or 1-5,14")
    parser.add_argument("--data-dir", default=None,
                        help="where the generated Parquet and the regionscan tables are kept and reused "
                             "(default: <tempdir>/regionscan-tpch/sf<scale>)")
    parser.add_argument("--reload", action="store_true", help="load the regionscan tables again")
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a read option of the regionscan side (repeatable)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting of the session (repeatable), e.g. "
                             "spark.regionscan.debug.timeline=<file> to record the JVM side of each read")
    parser.add_argument("--cold-query-first", action="store_true",
                        help="first runs without the untimed run of the query on each side before them: the "
                             "side that goes first (they alternate) also pays Spark's compilation of the query")
    parser.add_argument("--py-spy", dest="py_spy", metavar="DIR", help="profile the worker's timed runs with py-spy")
    parser.add_argument("--py-spy-first", dest="py_spy_first", metavar="DIR",
                        help="profile the worker during each query's first runs with py-spy (DIR/qNN_first.txt)")
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args(argv)
    try:
        numbers = parse_query_list(args.queries)
    except ValueError as e:
        parser.error(str(e))
    for flag, given in (("--option", args.option), ("--conf", args.conf)):
        bad = [o for o in given if "=" not in o]
        if bad:
            parser.error(f"{flag} takes KEY=VALUE, not {bad[0]!r}")
    options = dict(o.split("=", 1) for o in args.option)
    import tempfile

    data_dir = os.path.abspath(args.data_dir or os.path.join(tempfile.gettempdir(), "regionscan-tpch",
                                                             f"sf{args.scale:g}"))
    os.makedirs(data_dir, exist_ok=True)
    parquet = generate(data_dir, args.scale)
    spark = session(args.cores, args.driver_memory, dict(c.split("=", 1) for c in args.conf))
    rows: list[dict] = []
    try:
        root = load(spark, data_dir, parquet, args.reload)
        worker = Worker(spark)
        frames = _frames(spark, root, parquet, options)
        profiler = Profiler(args.py_spy)
        first_profiler = Profiler(args.py_spy_first, "_first") if args.py_spy_first else None
        cache = worker.stats().get("block_cache", {})
        _say(f"TPC-H SF {args.scale:g}, Spark local[{args.cores}], first run on a fresh engine worker, "
             f"{args.warmups} warm-up, best of {args.repeat} (wall); ratio = Parquet's time / ours; "
             f"worker and JVM: CPU-s per timed run; worker block cache {json.dumps(cache)}")
        _say(HEAD)
        for number in numbers:
            row = run_query(spark, worker, frames, number, args.warmups, args.repeat, profiler,
                            args.cold_query_first, first_profiler)
            rows.append(row)
            _say(_line(row))
            if row["first_profile"]:
                _say(row["first_profile"].replace("py-spy,", "py-spy of the first runs,", 1))
            if row["profile"]:
                _say(row["profile"])
    finally:
        spark.stop()
    s = summary(rows)
    _say(f"  answers equal to Parquet's: {s['equal']}/{s['queries']}")
    _say(f"  geometric mean {s['geomean']:.2f}x (first runs {s['first_geomean']:.2f}x); worst q{s['worst'][0]:02d} "
         f"{s['worst'][1]:.2f}x (first runs: q{s['worst_first'][0]:02d} {s['worst_first'][1]:.2f}x); "
         f"engine worker peak RSS {s['worker_peak_rss'] / 2**20:.0f} MiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"scale": args.scale, "cores": args.cores, "warmups": args.warmups, "repeat": args.repeat,
                       "options": options, "queries": rows, "summary": s, "load_average": os.getloadavg()},
                      f, indent=2, default=str)
    return 0 if s["equal"] == s["queries"] else 1


if __name__ == "__main__":
    sys.exit(main())
