"""storage.keys: the one home of row-key arithmetic, checked against brute force.

Every helper is compared with a membership model over a small universe of keys
(all byte strings of up to three bytes over 0x00, 0x01, 0x7f and 0xff), which
holds the edge cases that matter: empty keys, keys of zero bytes, keys of
0xff bytes.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from storage.keys import (
    clip_bounds,
    clip_range,
    intersect,
    key_after,
    normalize,
    prefix_stop,
    row_range_of,
    union,
)

ALPHABET = [0x00, 0x01, 0x7F, 0xFF]
UNIVERSE = sorted(
    bytes(p) for n in range(4) for p in itertools.product(ALPHABET, repeat=n)
)

keys = st.sampled_from(UNIVERSE)
stops = st.one_of(st.none(), keys)
ranges = st.tuples(keys, stops)
range_lists = st.lists(ranges, max_size=5)


def inside(key: bytes, r) -> bool:
    start, stop = r
    return start <= key and (stop is None or key < stop)


def covered(key: bytes, rs) -> bool:
    return any(inside(key, r) for r in rs)


def check_normalized(rs) -> None:
    """Sorted, non-empty, and neither overlapping nor touching."""
    for start, stop in rs:
        assert stop is None or start < stop
    for (_, prev_stop), (start, _) in zip(rs, rs[1:]):
        assert prev_stop is not None and prev_stop < start


@given(key=keys)
def test_key_after_is_the_next_key(key):
    nxt = key_after(key)
    assert nxt > key
    # nothing lies between a key and the one after it (the universe is closed under prefixes)
    assert not [k for k in UNIVERSE if key < k < nxt]
    assert row_range_of(key) == (key, nxt)
    assert [k for k in UNIVERSE if inside(k, row_range_of(key))] == [key]


@given(prefix=keys)
def test_prefix_stop_bounds_exactly_the_keys_with_the_prefix(prefix):
    stop = prefix_stop(prefix)
    for k in UNIVERSE:
        assert inside(k, (prefix, stop)) == k.startswith(prefix)


@given(r=ranges, bounds=ranges)
def test_clip_keeps_the_keys_in_both(r, bounds):
    clipped = clip_range(*r, *bounds)
    lo, hi = clip_bounds(*r, *bounds)
    for k in UNIVERSE:
        both = inside(k, r) and inside(k, bounds)
        assert inside(k, (lo, hi)) == both
        assert (clipped is not None and inside(k, clipped)) == both
    assert clipped is None or clipped == (lo, hi)
    if clipped is None:
        assert hi is not None and lo >= hi


@given(a=range_lists, b=range_lists)
def test_normalize_intersect_and_union_keep_membership(a, b):
    na, nb = normalize(a), normalize(b)
    both, either = intersect(na, nb), union(na, nb)
    for rs in (na, nb, both, either):
        check_normalized(rs)
    for k in UNIVERSE:
        assert covered(k, na) == covered(k, a)
        assert covered(k, both) == (covered(k, a) and covered(k, b))
        assert covered(k, either) == (covered(k, a) or covered(k, b))


@given(bounds=ranges, filter_ranges=range_lists)
def test_a_scan_range_cut_by_unnormalized_filter_ranges(bounds, filter_ranges):
    """Table scans intersect [low, high) with a filter's ranges as given (one list, any order)."""
    spans = intersect([bounds], filter_ranges)
    check_normalized(spans)
    for k in UNIVERSE:
        assert covered(k, spans) == (inside(k, bounds) and covered(k, filter_ranges))
