"""Row counts over regions whose memstore holds deletes and puts again: live rows, never cells.

``count_region_rows`` answers from the block indexes only when the memstore holds nothing
for the range; otherwise it scans with the row-counting filter, which resolves versions and
deletes.  Each count here (the table's, over a range, and the pinned one the connector uses,
whose memstore is the pinned WAL's records) must equal the rows a full scan returns.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from storage.engine import pin_table, pinned_row_count

ROWS = [b"a1", b"a2", b"b1", b"m1", b"m2", b"z1"]  # both sides of the split key "m"

_OPS = st.lists(
    st.tuples(st.sampled_from(["put", "put2", "delete", "delete_column", "delete_family", "flush"]),
              st.sampled_from(ROWS)),
    max_size=14,
)


def _apply(table, op: str, row: bytes) -> None:
    if op == "put":
        table.put(row, {b"cf:a": b"1", b"g:b": b"2"})
    elif op == "put2":
        table.put(row, {b"cf:a": b"3"})  # another version of one cell
    elif op == "delete":
        table.delete(row)
    elif op == "delete_column":
        table.delete(row, columns=[b"cf:a"])
    elif op == "delete_family":
        table.delete(row, columns=[b"g"])
    else:
        table.flush()


def _check(table) -> None:
    rows = [k for k, _ in table.scan()]
    assert table.count() == len(rows)
    assert table.count(b"a2", b"m2") == len([k for k in rows if b"a2" <= k < b"m2"])
    assert table.count(row_prefix=b"m") == len([k for k in rows if k.startswith(b"m")])
    snapshot = pin_table(table.fs)
    assert pinned_row_count(table.fs, "t", snapshot.regions, snapshot.families, [(b"", None)]) == len(rows)
    assert pinned_row_count(table.fs, "t", snapshot.regions, snapshot.families, [(b"b", b"z")]) == \
        len([k for k in rows if b"b" <= k < b"z"])


def test_counts_over_deletes_and_puts_again_in_the_memstore(tmp_path):
    with storage.connect(str(tmp_path / "root")) as conn:
        table = conn.create_table("t", {"cf": {}, "g": {}}, split_keys=[b"m"], settings={"wal_sync": "none"})
        for row in ROWS:
            _apply(table, "put", row)
        table.flush()  # clean files: the index path, until the memstore holds something
        _check(table)
        for op, row in [("delete", b"a1"), ("delete", b"a2"), ("put2", b"a2"), ("delete_column", b"b1"),
                        ("delete_column", b"m1"), ("delete_family", b"m1"), ("put", b"n9"), ("put2", b"n9"),
                        ("delete", b"zz"), ("delete_family", b"z1")]:
            _apply(table, op, row)
            _check(table)


@settings(max_examples=5, deadline=None)  # about half a second each: a table per example
@given(_OPS)
def test_counts_agree_with_the_scan_after_any_writes(tmp_path_factory, ops):
    with storage.connect(str(tmp_path_factory.mktemp("count") / "root")) as conn:
        table = conn.create_table("t", {"cf": {}, "g": {}}, split_keys=[b"m"], settings={"wal_sync": "none"})
        for row in ROWS[::2]:
            _apply(table, "put", row)
        table.flush()
        for op, row in ops:
            _apply(table, op, row)
        _check(table)
