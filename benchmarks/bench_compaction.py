"""Major compaction benchmark: dense files merged as rows, against files that
need their cells resolved.

Data: ``--rows`` rows (200K by default) of the sample table (4-byte key,
``cf:n`` and a 100-byte ``cf:s``) in 3 regions, written in ``--files``
flushes.  Two layouts:

* ``appends``: each flush writes rows of its own (every ``files``-th row),
  so the files share no row: a major compaction merges them as rows and
  writes dense blocks without a cell in between;
* ``updates``: each flush rewrites the same rows (a quarter of the table)
  with a newer value, so the files share rows and the compaction must
  resolve versions from cells.

Each run builds the table afresh (not timed) and times ``compact(major=True)``;
the best of ``--repeat`` runs (``--clock cpu`` by default) is printed with
the table's rows per second.  ``--code DIR`` imports the engine from
another checkout (to compare two versions of the code in one session)::

    python benchmarks/bench_compaction.py --rows 200000 --repeat 3
    python benchmarks/bench_compaction.py --rows 200000 --repeat 3 --code /path/to/other/checkout
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _engine_path(argv: list[str]) -> str:
    """The checkout to import from: ``--code DIR`` if given, else this one."""
    for i, arg in enumerate(argv):
        if arg == "--code" and i + 1 < len(argv):
            return os.path.abspath(argv[i + 1])
        if arg.startswith("--code="):
            return os.path.abspath(arg.split("=", 1)[1])
    return _ROOT


sys.path.insert(0, _engine_path(sys.argv[1:]))

import storage  # noqa: E402  (first: the harness below then finds it imported)
from jobs.demo import sample_row, split_keys_for  # noqa: E402

from harness import CLOCKS  # noqa: E402  (the shared clocks)

__all__ = ["main"]


def build(conn: storage.Connection, name: str, rows: int, files: int, layout: str) -> storage.Table:
    """The table of ``layout`` in ``files`` flushes (see the module docstring)."""
    table = conn.create_table(
        name, {"cf": {"max_versions": 1}}, split_keys=split_keys_for(rows, 3),
        settings={"wal_sync": "none", "memstore_flush_size": 1 << 40, "compaction_threshold": 1000},
    )
    for part in range(files):
        if layout == "appends":
            picked = range(part, rows, files)
        else:
            picked = range(0, rows, 4) if part else range(rows)
        with table.batch(batch_size=10_000, timestamp=1000 + part) as batch:
            for i in picked:
                key, data = sample_row(i, 100)
                batch.put(key, data)
        table.flush()
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--code", default=None, help="import the engine from this checkout instead")
    args = parser.parse_args(argv)
    clock = CLOCKS[args.clock]
    root = tempfile.mkdtemp(prefix="bench-compaction-")
    print(f"engine from {os.path.dirname(storage.__file__)}; clock: {args.clock}")
    try:
        best = {}
        for run in range(args.repeat):
            for layout in ("appends", "updates"):
                conn = storage.connect(os.path.join(root, f"{layout}{run}"), block_cache_size=64 << 20)
                try:
                    table = build(conn, "t", args.rows, args.files, layout)
                    t0 = clock()
                    table.compact(major=True)
                    secs = clock() - t0
                    files = sum(len(r.stores["cf"].files) for r in table._regions)
                finally:
                    conn.close()
                best[layout] = min(best.get(layout, secs), secs)
                assert files == 3, f"{files} files after a major compaction of 3 regions"
        for layout, secs in best.items():
            print(f"major compaction, {layout:<8} {args.files} files of {args.rows:,} rows: "
                  f"{secs:7.3f} s  {args.rows / secs:>12,.0f} table rows/s")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
