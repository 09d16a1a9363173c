"""Child process of the crash test: writes, flushes, compacts and splits until killed.

After each acknowledged write it prints ``ACK <row-hex> <value-hex>`` and
flushes stdout, so the parent knows exactly which writes the engine promised
to keep.  Not a test module itself.
"""

from __future__ import annotations

import random
import sys

import storage


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


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
