"""connector.disjunction without Spark: random OR/AND trees of row-key comparisons become key
ranges that hold exactly the keys the tree selects (when handled) or a superset (when not)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from pyspark.sql import datasource as ds

from connector.disjunction import And, Opaque, Or, push_tree
from serde import create_serde

SERDE = create_serde("binary", "k STRING :key, b STRING c:b, n INT c:n")
KEYS = ["", "a", "a\x00", "ab", "b", "ba", "bb", "c", "cz", "d", "zz"]
_OPS = {
    "EqualTo": lambda k, v: k == v, "GreaterThan": lambda k, v: k > v, "GreaterThanOrEqual": lambda k, v: k >= v,
    "LessThan": lambda k, v: k < v, "LessThanOrEqual": lambda k, v: k <= v,
}


def _holds(f, key: str) -> bool:
    if isinstance(f, Or):
        return any(_holds(c, key) for c in f.children)
    if isinstance(f, And):
        return all(_holds(c, key) for c in f.children)
    if isinstance(f, ds.In):
        return key in f.value
    if isinstance(f, ds.StringStartsWith):
        return key.startswith(f.value)
    return _OPS[type(f).__name__](key, f.value)


def _inside(ranges, key: str) -> bool:
    raw = key.encode()
    return ranges is None or any(lo <= raw and (hi is None or raw < hi) for lo, hi in ranges)


_leaf = st.one_of(
    st.builds(lambda op, v: getattr(ds, op)(("k",), v), st.sampled_from(sorted(_OPS)), st.sampled_from(KEYS)),
    st.builds(lambda vs: ds.In(("k",), tuple(vs)), st.lists(st.sampled_from(KEYS), min_size=1, max_size=3)),
    st.builds(lambda v: ds.StringStartsWith(("k",), v), st.sampled_from(["a", "b", "c"])),
)
_trees = st.recursive(_leaf, lambda sub: st.builds(
    lambda node, kids: node(tuple(kids)), st.sampled_from([Or, And]), st.lists(sub, min_size=2, max_size=3)),
    max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(tree=_trees)
def test_key_ranges_of_a_tree_hold_exactly_its_keys(tree):
    result = push_tree([tree], SERDE)
    assert result.handled == [tree] and result.engine_filter is None  # key comparisons only: all exact
    ranges = result.key_ranges
    assert ranges is None or all(ranges[i][1] is not None and ranges[i][1] < ranges[i + 1][0]
                                 for i in range(len(ranges) - 1))  # sorted, disjoint, not touching
    for key in KEYS + ["aa", "b\x00", "c\x00", "y"]:
        assert _inside(ranges, key) == _holds(tree, key), (key, tree.describe() if hasattr(tree, "describe") else tree)


def test_an_or_with_a_branch_spark_must_test_is_a_superset_left_for_spark():
    tree = Or((ds.EqualTo(("k",), "a"), And((ds.LessThan(("k",), "c"), Opaque("upper(k) = 'B'")))))
    result = push_tree([tree], SERDE)
    assert result.residual == [tree] and result.handled == []
    assert result.key_ranges == [(b"", b"c")]  # the Opaque branch still has its key bound


def test_an_or_with_a_cell_test_is_a_must_pass_one_list():
    tree = Or((ds.EqualTo(("k",), "a"), ds.EqualTo(("b",), "4")))
    result = push_tree([tree, ds.LessThan(("k",), "m")], SERDE)
    assert result.key_ranges == [(b"", b"m")]
    text = repr(result.engine_filter)
    assert text.startswith("MultiRowRangeFilter ('a', true, 'a") and " OR SingleColumnValueFilter ('c', 'b', =" in text
    assert len(result.handled) == 2 and not result.residual


def test_an_or_with_a_fixed_width_cell_test_is_compared_once_decoded():
    # a binary INT cell may hold bytes of another encoding: no engine filter may drop its rows unread
    tree = Or((ds.EqualTo(("k",), "a"), ds.EqualTo(("n",), 4)))
    result = push_tree([tree, ds.LessThan(("k",), "m")], SERDE)
    assert result.key_ranges == [(b"", b"m")] and result.engine_filter is None
    assert result.residual == [tree]
