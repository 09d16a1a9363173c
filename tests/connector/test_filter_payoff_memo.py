"""The payoff sample of a push is a planning statistic keyed on the table's exact state.

A repeated ``push`` of the same read and filters on an unchanged table decides from the shares
the first push sampled, without reading a row (connector/filter_payoff.py); any write, flush or
compaction changes the table's state (store files, manifest generation, WAL position), and the
next push samples again, so a decision never outlives the rows it was taken on.  The sample cuts
regions at block-index keys only as far as it needs ``SAMPLE_SPLITS`` splits, and reads the same
rows as when every region was cut into that many pieces.
"""

from __future__ import annotations

import pytest

import storage
from connector import filter_payoff
from connector.source_config import SourceConfig
from connector.worker import read_ops, read_plan
from serde import create_serde
from serde_tables import put_rows

MAPPING = "k INT :key, v INT cf:v, w INT cf:w"
KEEP_ALL = [{"op": "LessThan", "column": "v", "value": {"t": "int", "v": 1000}}]  # every stored v is below


def _rows(v: int) -> list[dict]:
    return [{"k": k, "v": v, "w": k % 7} for k in range(0, 4000)]


@pytest.fixture
def table(tmp_path):
    """A 4-region table whose every ``v`` is 1, its WAL synced on every write (a push sees the puts)."""
    root = str(tmp_path / "root")
    serde = create_serde("binary", MAPPING)
    conn = storage.connect(root)
    splits = sorted(serde.serialize({"k": k})[0] for k in (1000, 2000, 3000))
    t = conn.create_table("t", {"cf": {}}, split_keys=splits, settings={"wal_sync": "each"})
    put_rows(t, serde, _rows(1))
    t.flush()
    yield root, t, serde
    conn.close()


@pytest.fixture
def samples(monkeypatch):
    """How many payoff samples were read (the real sample, counted)."""
    taken = []
    real = read_plan._sample

    def counted(*args, **kwargs):
        taken.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(read_plan, "_sample", counted)
    return taken


def _push(root: str) -> dict:
    return read_ops.push({"options": {"root": root, "table": "t", "hbase.columns.mapping": MAPPING},
                          "filters": KEEP_ALL})


def test_a_repeated_push_on_an_unchanged_table_reads_no_sample(table, samples):
    root, _, _ = table
    first = _push(root)
    assert first["handled"] == [] and any("left for Spark" in n for n in first["notes"])  # keeps 100%
    again = _push(root)
    assert again == first
    assert len(samples) == 1  # the second push decided from the first one's shares


def test_a_write_makes_the_next_push_sample_again_and_decide_anew(table, samples):
    root, t, serde = table
    assert _push(root)["handled"] == []  # v < 1000 keeps every row: left to Spark
    put_rows(t, serde, _rows(5000))  # now no row keeps: in the memstore and WAL only
    after_write = _push(root)
    assert len(samples) == 2
    assert after_write["handled"] == [0], after_write["notes"]  # keeps none: the worker drops them
    t.flush()  # same rows, new store files: the state changed again
    assert _push(root)["handled"] == [0]
    assert len(samples) == 3


def test_the_sample_cuts_regions_only_as_far_as_it_needs(table):
    root, _, _ = table
    config = SourceConfig.from_options({"root": root, "table": "t", "hbase.columns.mapping": MAPPING})
    result = read_plan.push_read_filters(config, read_plan.decode_filters(KEEP_ALL))
    snapshot = read_plan._pinned(config)
    assert len(snapshot.regions) == 4
    fmt = config.input_format(result.key_ranges)
    assert read_plan._pieces_per_region(fmt, snapshot) == 2  # 8 splits from 4 regions
    assert read_plan._pieces_per_region(fmt, None) == filter_payoff.SAMPLE_SPLITS
    cut_less = read_plan._sample(config, result, ["v"], snapshot)
    cut_all = read_plan._sample(config, result, ["v"], None)
    assert [b.num_rows for b in cut_less] == [b.num_rows for b in cut_all]
    assert all(a.equals(b) for a, b in zip(cut_less, cut_all))
