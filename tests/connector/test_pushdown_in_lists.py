"""Long IN lists (a runtime filter's join keys) translate to one point a distinct value, in
byte order, on the row key and on a value column alike; a list and its shuffled, repeated
copy translate the same."""

from __future__ import annotations

import random

from connector.pushdown import push_filters
from connector.worker.read_plan import In
from serde import create_serde

SERDE = create_serde("binary", "k BIGINT :key, n INT cf:n")


def test_a_long_in_list_is_one_point_a_distinct_value_in_order():
    values = list(range(-1500, 1500, 3))
    shuffled = values + values[:700]
    random.Random(7).shuffle(shuffled)
    on_key = push_filters([In(("k",), shuffled)], SERDE)
    assert on_key.key_ranges == push_filters([In(("k",), values)], SERDE).key_ranges
    assert len(on_key.key_ranges) == len(values)
    keys = [lo for lo, _ in on_key.key_ranges]
    assert keys == sorted(keys)  # byte order: the stored BIGINT has no sign flip, so 0 comes first
    assert set(keys) == {SERDE.serialize({"k": v, "n": 0})[0] for v in values}
    on_value = push_filters([In(("n",), shuffled + [None])], SERDE)
    plain = push_filters([In(("n",), values)], SERDE)
    # the block-skipping filter: one equality a distinct value
    assert str(on_value.prune_filter) == str(plain.prune_filter)
    assert str(on_value.prune_filter).count("SingleColumnValueFilter") == len(values)
    assert on_value.key_ranges is None
