"""Many keys into a memstore map at once: one sorted merge instead of an insert per key.

A ``SortedDict`` inserts one key at a time with a bisect and a list insert
per key (about 2 us a key in a map of 100K cells here).  A batch of writes
(``table.batch()``, a WAL record of many cells) instead sorts its new keys
once and adds them to the dict in one ``dict.update``; the sorted key list
takes them at the next read that needs order (``Segment.ordered``), merged a
sublist at a time: one bisect per sublist they touch, one C-level
``list.sort`` (a merge of two sorted runs) each.

This reaches into ``sortedcontainers.SortedList``'s documented-in-code
layout (``_lists`` of sorted sublists, ``_maxes`` their last keys,
``_index`` the positional index rebuilt on demand, ``_len``, ``_load``):
sortedcontainers 2.x keeps it stable, and the memstore tests check the map
against a plain sorted list after bulk inserts.
"""

from __future__ import annotations

from bisect import bisect_right

from sortedcontainers import SortedList

__all__ = ["insert_new_sorted"]

# A sublist taking fewer new keys than its length over this inserts them one bisect each.  A
# batch of random keys lands a few keys in every sublist of a large map: re-sorting each
# sublist then costs a comparison per key already there, which made the merge most of a
# random-order write's memstore insert (measured in docs/decisions/2026-12-05-write-path.md).
_SPARSE = 8


def insert_new_sorted(keys: SortedList, values: list) -> None:
    """Add ``values`` (ascending, none of them in ``keys`` already) to ``keys``."""
    n = len(values)
    if not n:
        return
    if not keys._maxes or n * 4 >= keys._len:
        keys.update(values)  # sortedcontainers' own bulk path: one sort of everything
        return
    lists, maxes, load = keys._lists, keys._maxes, keys._load
    last = len(lists) - 1
    i = 0
    grown = False
    for p in range(len(lists)):
        # the values up to this sublist's last key belong to it; the rest of them to the last one
        j = n if p == last else bisect_right(values, maxes[p], i)
        if j > i:
            sub = lists[p]
            if (j - i) * _SPARSE < len(sub):
                # a few keys into a long sublist: a bisect each (a sort would compare every
                # key of the sublist once, as it first walks the run it is given)
                lo = 0
                for k in range(i, j):
                    value = values[k]
                    lo = bisect_right(sub, value, lo)
                    sub.insert(lo, value)
                    lo += 1
            else:
                sub.extend(values[i:j])
                sub.sort()  # two sorted runs of similar length: a linear merge
            maxes[p] = sub[-1]
            grown = grown or len(sub) > 2 * load
            i = j
            if i >= n:
                break
    if grown:
        parts = []
        for sub in lists:
            if len(sub) > 2 * load:
                parts.extend(sub[k : k + load] for k in range(0, len(sub), load))
            else:
                parts.append(sub)
        lists[:] = parts
        maxes[:] = [sub[-1] for sub in parts]
    keys._len += n
    del keys._index[:]
