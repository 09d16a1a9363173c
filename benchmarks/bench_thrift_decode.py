"""Cost of the gateway's container-header checks when it decodes a request.

Decodes one ``mutateRows`` request (``--rows`` BatchMutations of one
Mutation each, so one list header per row plus the outer one) from memory
with thriftpy2's pure-Python binary and compact protocols as they ship and
with the gateway's checked ones (:mod:`storage.thrift.containers`), best of
``--repeat`` interleaved rounds, and prints the ratio.  Run from the
repository root::

    python benchmarks/bench_thrift_decode.py --rows 20000 --repeat 7
"""

from __future__ import annotations

import argparse
import time

from thriftpy2.protocol.binary import TBinaryProtocol
from thriftpy2.protocol.compact import TCompactProtocol
from thriftpy2.transport import TMemoryBuffer

from harness import best_of_self_timed  # puts the checkout on sys.path

from storage.thrift.containers import CheckedBinaryProtocol, CheckedCompactProtocol
from storage.thrift.idl import hbase


class _Request(TMemoryBuffer):
    """A request in memory, with what the checked protocols ask of the gateway's reader."""

    max_container_entries = 1_000_000

    def left(self) -> int:
        return 1 << 30


def _request(rows: int):
    batches = [hbase.BatchMutation(row=b"r%08d" % i,
                                   mutations=[hbase.Mutation(column=b"cf:a", value=b"v" * 20, isDelete=False)])
               for i in range(rows)]
    return hbase.Hbase.mutateRows_args(tableName=b"t", rowBatches=batches, attributes={})


def _decode_seconds(cls, data: bytes, rows: int) -> float:
    started = time.perf_counter()
    out = hbase.Hbase.mutateRows_args()
    cls(_Request(data)).read_struct(out)
    elapsed = time.perf_counter() - started
    assert len(out.rowBatches) == rows
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    request = _request(args.rows)
    for name, plain, checked in (("binary", TBinaryProtocol, CheckedBinaryProtocol),
                                 ("compact", TCompactProtocol, CheckedCompactProtocol)):
        buf = TMemoryBuffer()
        plain(buf).write_struct(request)
        data = buf.getvalue()
        plain_s, checked_s = best_of_self_timed(  # interleaved, so load changes hit both alike
            args.repeat, lambda: _decode_seconds(plain, data, args.rows),
            lambda: _decode_seconds(checked, data, args.rows))
        best = {"thriftpy2": plain_s, "checked": checked_s}
        print(f"{name}: mutateRows of {args.rows} rows ({len(data)} bytes): "
              f"thriftpy2 {best['thriftpy2'] * 1000:.1f} ms, checked {best['checked'] * 1000:.1f} ms, "
              f"checked/thriftpy2 {best['checked'] / best['thriftpy2']:.3f}")


if __name__ == "__main__":
    main()
