"""Model-based test of the engine: random operations checked against a dict model.

Timestamps increase with every operation, so the model only needs HBase's
rules for versions and delete markers, and what a major compaction prunes.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage

ROWS = [b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h"]
COLUMNS = [b"cf1:q1", b"cf1:q2", b"cf2:q1", b"cf2:q2"]
MAX_VERSIONS = {b"cf1": 1, b"cf2": 3}

op = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(ROWS), st.sampled_from(COLUMNS), st.binary(max_size=8)),
    st.tuples(st.just("put"), st.sampled_from(ROWS), st.sampled_from(COLUMNS), st.binary(max_size=8)),
    st.tuples(st.just("delete_row"), st.sampled_from(ROWS)),
    st.tuples(st.just("delete_column"), st.sampled_from(ROWS), st.sampled_from(COLUMNS)),
    st.tuples(st.just("delete_family"), st.sampled_from(ROWS), st.sampled_from([b"cf1", b"cf2"])),
    st.tuples(st.just("delete_version"), st.sampled_from(ROWS), st.sampled_from(COLUMNS), st.integers(0, 3)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("minor")),
    st.tuples(st.just("major")),
    st.tuples(st.just("split"), st.sampled_from(ROWS[1:])),
    st.tuples(st.just("reopen")),
)


class Model:
    """Visible versions per (row, column): newest first lists of (ts, value)."""

    def __init__(self):
        self.cells: dict[tuple[bytes, bytes], list[tuple[int, bytes]]] = {}

    def put(self, row, column, ts, value):
        self.cells.setdefault((row, column), []).insert(0, (ts, value))

    def delete_where(self, pred):
        for key in list(self.cells):
            if pred(*key):
                del self.cells[key]

    def delete_version(self, row, column, ts):
        versions = self.cells.get((row, column), [])
        self.cells[(row, column)] = [v for v in versions if v[0] != ts]

    def major(self):
        for key, versions in self.cells.items():
            self.cells[key] = versions[: MAX_VERSIONS[key[1].split(b":")[0]]]

    def visible(self, row, column):
        versions = self.cells.get((row, column), [])
        return versions[: MAX_VERSIONS[column.split(b":")[0]]]

    def rows(self):
        out = {}
        for (row, column) in sorted(self.cells):
            v = self.visible(row, column)
            if v:
                out.setdefault(row, {})[column] = v[0][1]
        return out


def run_ops(tmp_path, ops):
    conn = storage.connect(str(tmp_path / "root"))
    table = conn.create_table(
        "m", {"cf1": {"max_versions": 1}, "cf2": {"max_versions": 3}},
        split_keys=[b"d"], settings={"wal_sync": "none", "compaction_threshold": 3},
    )
    model = Model()
    clock = itertools.count(1000)
    for o in ops:
        kind = o[0]
        if kind == "put":
            ts = next(clock)
            table.put(o[1], {o[2]: o[3]}, timestamp=ts)
            model.put(o[1], o[2], ts, o[3])
        elif kind == "delete_row":
            table.delete(o[1], timestamp=next(clock))
            model.delete_where(lambda r, c, row=o[1]: r == row)
        elif kind == "delete_column":
            table.delete(o[1], columns=[o[2]], timestamp=next(clock))
            model.delete_where(lambda r, c, row=o[1], col=o[2]: r == row and c == col)
        elif kind == "delete_family":
            table.delete(o[1], columns=[o[2]], timestamp=next(clock))
            model.delete_where(lambda r, c, row=o[1], fam=o[2]: r == row and c.startswith(fam + b":"))
        elif kind == "delete_version":
            versions = model.visible(o[1], o[2])
            if o[3] < len(versions):
                ts = versions[o[3]][0]
                table.delete_version(o[1], o[2], ts)
                model.delete_version(o[1], o[2], ts)
        elif kind == "flush":
            table.flush()
        elif kind == "minor":
            for r in table._regions:
                r.flush()
                r.compact(major=False)
        elif kind == "major":
            table.compact(major=True)
            model.major()
        elif kind == "split":
            if o[1] not in [r.start for r in table.region_infos()]:
                table.split(o[1])
        elif kind == "reopen":
            conn.close()
            conn = storage.connect(str(tmp_path / "root"))
            table = conn.table("m")
    return conn, table, model


def check_against_model(table, model):
    expected = model.rows()
    assert dict(table.scan()) == expected
    assert list(table.scan(reverse=True)) == sorted(expected.items(), reverse=True)
    assert dict(table.scan(path="cell")) == expected
    assert list(table.scan(reverse=True, path="cell")) == sorted(expected.items(), reverse=True)
    for row in ROWS:
        assert table.row(row) == expected.get(row, {})
        for column in COLUMNS:
            assert table.cells(row, column, versions=5, include_timestamp=True) == [
                (v, ts) for ts, v in model.visible(row, column)
            ]
    rows_batches = list(table.scan_batches(columns=COLUMNS))
    got = {}
    for b in rows_batches:
        for rec in b.to_pylist():
            got[rec["key"]] = {c.encode(): v for c, v in rec.items() if c != "key" and v is not None}
    assert got == expected
    table.check()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, max_size=40))
def test_random_operations_match_model(tmp_path_factory, ops):
    tmp = tmp_path_factory.mktemp("model")
    conn, table, model = run_ops(tmp, ops)
    try:
        check_against_model(table, model)
        conn.close()
        conn = storage.connect(str(tmp / "root"))
        check_against_model(conn.table("m"), model)
    finally:
        conn.close()
