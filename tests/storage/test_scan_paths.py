"""The batch path and the cell-at-a-time path give the same answers on random data.

Random tables mix puts and all delete types at arbitrary (not increasing)
timestamps, several store files per family, unflushed memstore contents, a
family with several versions and one with a TTL; every scan option and a set
of filters run through both paths and must agree.
"""

from __future__ import annotations

import random
import time

import pyarrow as pa
import pytest

import storage

FILTERS = [
    None,
    "PrefixFilter ('r1')",
    "KeyOnlyFilter() AND FirstKeyOnlyFilter()",
    "FirstKeyOnlyFilter()",
    "ColumnPrefixFilter ('q1')",
    "QualifierFilter (>=, 'binary:q2')",
    "ValueFilter (=, 'substring:7')",
    "SingleColumnValueFilter ('cf', 'q1', >, 'binary:v5')",
    "SingleColumnValueFilter ('cf', 'q2', =, 'binary:v3', true, true)",
    "PageFilter (5)",
    "RowFilter (<, 'binary:r2')",
    "TimestampsFilter (1003, 1010, 1017)",
    "MultiRowRangeFilter ('r0', true, 'r05', false, 'r3', true, 'r35', true)",
    "(PrefixFilter ('r0') OR PrefixFilter ('r4')) AND ValueFilter (!=, 'regexstring:.*1$')",
    "InclusiveStopFilter ('r31')",
    "ColumnCountGetFilter (2)",
    "ColumnPaginationFilter (2, 'q1')",
    "ColumnPaginationFilter (1, 1)",
    "DependentColumnFilter ('cf', 'q1')",
    "DependentColumnFilter ('cf', 'q0', true, <, 'binary:v5')",
    "FuzzyRowFilter ('r?1', '010', 'r4', '00')",
    "RandomRowFilter (0.5, 3) AND ValueFilter (<, 'null:')",
    "PrefixFilter ('r1') OR RandomRowFilter (0.3, 9)",
]


def _build(tmp_path, seed: int):
    rng = random.Random(seed)
    conn = storage.connect(str(tmp_path / f"root{seed}"))
    table = conn.create_table(
        "p",
        {"cf": {"max_versions": 3}, "one": {"max_versions": 1}, "ttl": {"ttl": 3600}},
        split_keys=[b"r2", b"r4"],
        settings={"wal_sync": "none", "compaction_threshold": 100},
    )
    now = int(time.time() * 1000)
    rows = [b"r%d%d" % (i, j) for i in range(6) for j in range(rng.randint(1, 8))]
    for step in range(rng.randint(150, 300)):
        row = rng.choice(rows)
        kind = rng.random()
        ts = 1000 + rng.randrange(25)
        if kind < 0.7:
            family = rng.choice([b"cf", b"one", b"ttl"])
            if family == b"ttl":
                ts = now - rng.choice([0, 10, 7_200_000])  # some cells already expired
            data = {family + b":q%d" % rng.randrange(3): b"v%d" % rng.randrange(10)}
            table.put(row, data, timestamp=ts)
        elif kind < 0.78:
            table.delete(row, columns=[rng.choice([b"cf:q0", b"cf:q1", b"one:q2"])], timestamp=ts)
        elif kind < 0.84:
            table.delete_version(row, rng.choice([b"cf:q0", b"cf:q1", b"cf:q2"]), ts)
        elif kind < 0.87:
            table.delete(row, columns=[b"cf"], timestamp=ts)
        elif kind < 0.89:
            table.delete(row, timestamp=ts)
        if rng.random() < 0.03:
            table.flush()
    return conn, table


SCANS = [
    {},
    {"reverse": True},
    {"max_versions": 3},
    {"max_versions": 2, "reverse": True},
    {"columns": [b"cf:q1", b"one"]},
    {"columns": [b"ttl"]},
    {"time_range": (1005, 1015)},
    {"timestamp": 1012, "max_versions": 3},
    {"row_start": b"r1", "row_stop": b"r41"},
    {"row_start": b"r41", "row_stop": b"r1", "reverse": True},
    {"row_prefix": b"r3"},
    {"limit": 4},
    {"limit": 3, "reverse": True},
    {"include_timestamp": True, "max_versions": 3},
]


@pytest.mark.parametrize("seed", range(6))
def test_batch_and_cell_paths_agree(tmp_path, seed):
    conn, table = _build(tmp_path, seed)
    try:
        rng = random.Random(seed)
        for options in SCANS:
            for flt in rng.sample(FILTERS, 8):
                batch = list(table.scan(filter=flt, **options))
                cell = list(table.scan(filter=flt, path="cell", **options))
                assert batch == cell, (options, flt)
        for row in [b"r00", b"r11", b"r33", b"r50", b"nope"]:
            via_batch = dict(table.scan(row_start=row, row_stop=row + b"\x00"))
            assert table.row(row) == via_batch.get(row, {})
    finally:
        conn.close()


def test_row_count_on_a_clean_table_matches_the_cell_path(tmp_path):
    """Counting filters on a compacted single-version table (the streaming, no-resolution path)."""

    conn = storage.connect(str(tmp_path / "count"))
    t = conn.create_table("c", {"cf": {"block_size": 256}}, split_keys=[b"m"])
    rng = random.Random(5)
    for i in range(400):
        width = 40 if i % 97 == 0 else rng.randint(1, 4)  # some rows wider than a block
        t.put(b"%s%04d" % (b"a" if i % 2 else b"x", i), {b"cf:q%02d" % q: b"v%d" % q for q in range(width)})
    t.compact()
    assert all(not r.info.needs_resolution for r in t.store_file_readers())
    for text in ["FirstKeyOnlyFilter()", "KeyOnlyFilter() AND FirstKeyOnlyFilter()"]:
        for options in [{}, {"limit": 7}, {"row_start": b"a0100", "row_stop": b"x0300"}]:
            assert list(t.scan(filter=text, **options)) == list(t.scan(filter=text, path="cell", **options))
        cells = sum(b.num_rows for b in t.scan_batches(filter=text, output="cells"))
        assert cells == 400
    conn.close()


def test_reverse_scans_of_a_clean_file_match_forward_and_the_cell_path(tmp_path):
    conn = storage.connect(str(tmp_path / "rev"))
    t = conn.create_table("r", {"cf": {"block_size": 300}}, split_keys=[b"m"])
    rng = random.Random(9)
    for i in range(300):
        width = 12 if i % 50 == 0 else rng.randint(1, 3)  # a few rows wider than a block
        t.put(b"%s%04d" % (b"a" if i % 2 else b"x", i), {b"cf:q%d" % q: b"v%d-%d" % (i, q) for q in range(width)})
    t.compact()
    assert all(not r.info.needs_resolution for r in t.store_file_readers())
    forward = pa.Table.from_batches(list(t.scan_batches(columns=[b"cf:q0", b"cf:q1"]))).to_pylist()
    backward = pa.Table.from_batches(list(t.scan_batches(columns=[b"cf:q0", b"cf:q1"], reverse=True))).to_pylist()
    assert backward == forward[::-1]
    for options in [{}, {"limit": 9}, {"row_start": b"x0200", "row_stop": b"a0100"}, {"columns": [b"cf:q1"]},
                    {"filter": "PageFilter (7)"}, {"filter": "ValueFilter (=, 'substring:-1')"}]:
        assert list(t.scan(reverse=True, **options)) == list(t.scan(reverse=True, path="cell", **options)), options
    small = [b.num_rows for b in t.scan_batches(output="cells", reverse=True, batch_size=5)]
    assert sum(small) == sum(b.num_rows for b in t.scan_batches(output="cells"))
    conn.close()


@pytest.mark.parametrize(
    "text, discarded",
    [
        ("KeyOnlyFilter()", True),
        ("KeyOnlyFilter() AND FirstKeyOnlyFilter()", True),
        ("FirstKeyOnlyFilter() AND KeyOnlyFilter() AND PrefixFilter ('r')", True),
        ("KeyOnlyFilter(true)", False),  # values become their lengths: they are read
        ("KeyOnlyFilter() AND ValueFilter (=, 'binary:x')", False),
        ("KeyOnlyFilter() OR FirstKeyOnlyFilter()", False),
        ("FirstKeyOnlyFilter()", False),
    ],
)
def test_which_filters_let_a_scan_skip_copying_values(text, discarded):
    from storage.read.batch_stream import values_discarded
    from storage.filters import parse_filter_string

    assert values_discarded(parse_filter_string(text)) is discarded
