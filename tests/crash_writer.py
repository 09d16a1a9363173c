"""Child process of the crash tests: writes, flushes, compacts and splits until killed.

After each acknowledged write it prints ``ACK <row-hex> <value-hex>`` and
flushes stdout, so the parent knows exactly which writes the engine promised
to keep.  With a third argument ``batches`` it writes large batches from
several threads instead (one WAL record each, sharing syncs), every batch's
rows named ``B<seed>.<thread>.<n>-<i>-of-<count>`` so the parent can check
that a batch is kept whole or not at all, and acknowledges each batch with
``BATCH <seed>.<thread>.<n> <count>``.  With ``flush``, ``compact`` or
``split`` it runs that operation back to back between acknowledged writes;
with ``bulkload`` it commits bulk loads back to back (``LOAD <name> <count>``).
Not a test module itself.
"""

from __future__ import annotations

import random
import sys
import threading

import storage
from storage.vfs.fs import FileSystem


def main(root: str, seed: int) -> None:
    rng = random.Random(seed)
    conn = storage.connect(root)
    table = conn.table("crash") if conn.is_table_available("crash") else conn.create_table(
        "crash", {"cf": {"max_versions": 1}}, split_keys=[b"m"],
        settings={"wal_sync": "each", "memstore_flush_size": 20_000, "compaction_threshold": 3},
    )
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    n = 0
    while True:
        n += 1
        action = rng.random()
        if action < 0.04:
            table.flush()
        elif action < 0.06:
            table.compact(major=rng.random() < 0.5)
        elif action < 0.07:
            key = bytes([rng.randrange(97, 123)]) + b"%03d" % rng.randrange(1000)
            if key not in [r.start for r in table.region_infos()]:
                table.split(key)
        else:
            rows = [bytes([rng.randrange(97, 123)]) + b"%06d" % rng.randrange(10**6) for _ in range(rng.randint(1, 20))]
            value = b"v%d.%d-" % (seed, n) + bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
            with table.batch() as b:
                for row in rows:
                    b.put(row, {b"cf:v": value})
            out = "".join(f"ACK {row.hex()} {value.hex()}\n" for row in rows)
            sys.stdout.write(out)
            sys.stdout.flush()


def batches(root: str, seed: int, threads: int = 3) -> None:
    conn = storage.connect(root)
    table = conn.table("crash") if conn.is_table_available("crash") else conn.create_table(
        "crash", {"cf": {"max_versions": 1}}, split_keys=[b"m"],
        settings={"wal_sync": "each", "memstore_flush_size": 2_000_000, "compaction_threshold": 3},
    )
    out = threading.Lock()

    def work(t: int) -> None:
        rng = random.Random(seed * 100 + t)
        n = 0
        while True:
            n += 1
            name = b"B%d.%d.%d" % (seed, t, n)
            count = rng.randint(1, 600)
            value = bytes(rng.randrange(256) for _ in range(8)) * rng.randint(1, 120)
            with table.batch() as b:
                for i in range(count):
                    b.put(name + b"-%04d-of-%04d" % (i, count), {b"cf:v": value})
            if rng.random() < 0.03:
                table.flush()
            with out:
                sys.stdout.write(f"BATCH {name.decode()} {count}\n")
                sys.stdout.flush()

    for t in range(threads):
        threading.Thread(target=work, args=(t,), daemon=True).start()
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    threading.Event().wait()


def maintenance(root: str, seed: int, op: str) -> None:
    """Writes between back-to-back runs of one maintenance operation (``flush``,
    ``compact`` or ``split``), so a kill at a random moment mostly lands inside it."""
    rng = random.Random(seed)
    conn = storage.connect(root)
    table = conn.table("crash") if conn.is_table_available("crash") else conn.create_table(
        "crash", {"cf": {"max_versions": 1}}, split_keys=[b"m"],
        settings={"wal_sync": "each", "memstore_flush_size": 64 << 20, "compaction_threshold": 1000},
    )
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    n = 0
    while True:
        n += 1
        rows = [bytes([rng.randrange(97, 123)]) + b"%06d" % rng.randrange(10**6) for _ in range(rng.randint(50, 400))]
        value = b"v%d.%d-" % (seed, n) + bytes(rng.randrange(256) for _ in range(rng.randint(16, 200)))
        with table.batch() as b:
            for row in rows:
                b.put(row, {b"cf:v": value})
        sys.stdout.write("".join(f"ACK {row.hex()} {value.hex()}\n" for row in rows))
        sys.stdout.flush()
        sys.stdout.write(f"IN {op}\n")  # the parent counts the kills that land inside the operation
        sys.stdout.flush()
        if op == "flush":
            table.flush()
        elif op == "compact":
            table.flush()
            table.compact(major=rng.random() < 0.5)
        elif op == "split":
            key = bytes([rng.randrange(97, 123)]) + b"%03d" % rng.randrange(1000)
            if key not in [r.start for r in table.region_infos()]:
                table.split(key)
        sys.stdout.write("OUT\n")
        sys.stdout.flush()


def bulk_loads(root: str, seed: int) -> None:
    """Bulk loads committed back to back (the table is not held open meanwhile:
    a commit takes the writer lock); each load's rows are named
    ``L<seed>.<n>-<i>-of-<count>`` and acknowledged with ``LOAD <name> <count>``."""
    import pyarrow as pa

    from storage.engine import BulkLoadTask, commit_load, table_regions

    rng = random.Random(seed)
    with storage.connect(root) as conn:
        if not conn.is_table_available("crash"):
            conn.create_table("crash", {"cf": {"max_versions": 1}}, split_keys=[b"L%d." % seed])
    table_fs = FileSystem(root).sub("crash")
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    n = 0
    while True:
        n += 1
        name = b"L%d.%d" % (seed, n)
        count = rng.randint(100, 3000)
        keys = [name + b"-%05d-of-%05d" % (i, count) for i in range(count)]
        regions, families = table_regions(table_fs)
        task = BulkLoadTask(table_fs, name.decode(), "t0", regions, families, timestamp=n)
        task.add(pa.record_batch({"key": pa.array(keys, pa.binary()), "cf:v": pa.array(keys, pa.binary())}))
        staged = task.finish()
        sys.stdout.write("IN commit\n")
        sys.stdout.flush()
        commit_load(table_fs, name.decode(), staged)
        sys.stdout.write("OUT\n")
        sys.stdout.flush()
        sys.stdout.write(f"LOAD {name.decode()} {count}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    mode = sys.argv[3] if len(sys.argv) > 3 else None
    if mode == "batches":
        batches(sys.argv[1], int(sys.argv[2]))
    elif mode in ("flush", "compact", "split"):
        maintenance(sys.argv[1], int(sys.argv[2]), mode)
    elif mode == "bulkload":
        bulk_loads(sys.argv[1], int(sys.argv[2]))
    else:
        main(sys.argv[1], int(sys.argv[2]))
