"""OR and AND trees of Spark filters -> row-key ranges and engine filter lists.

pyspark's Python Data Source API hands a reader single-column filters only
(no ``Or``), so trees come from the JVM source alone: Spark's V2 predicates
``OR``/``AND`` arrive as :class:`Or` / :class:`And` nodes whose leaves are
pyspark's filter objects (or :class:`Opaque` for a predicate only Spark can
evaluate).  hbase-spark turns ``k = 'a' OR k = 'b' OR (k > 'c' AND k <= 'e')``
into points and ranges and scans only those; so does :func:`push_tree`:

* every branch of an OR is translated by :func:`~connector.pushdown.push_filters`
  (recursively for nested trees) into key ranges (None: no key bound), an
  engine filter, and whether it is exact;
* the OR's key ranges are the union of its branches' (the whole table if a
  branch has no key bound), merged, sorted and disjoint
  (:func:`storage.keys.union`); an AND's are the intersection;
* when a branch tests a non-key column the OR also becomes an engine
  ``FilterList`` (``MUST_PASS_ONE``) of its branches, each branch
  ``MUST_PASS_ALL`` of a ``MultiRowRangeFilter`` of its own key ranges (when
  narrower than the union) and its engine filter.

An OR is handled (Spark does not check it again) only if every branch is
exact; otherwise what it pushes is a superset of its rows and Spark re-checks
it.  The range algebra is :mod:`storage.keys`'; nothing here re-implements it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from storage.filters import Filter, FilterList, MultiRowRangeFilter
from storage.keys import KeyRange, intersect, normalize, union

from .pushdown import PushdownResult, describe_filter, push_filters

__all__ = ["Or", "And", "Opaque", "push_tree", "is_tree", "tree_columns"]


@dataclass(frozen=True, eq=False)
class Or:
    """A disjunction of filters (pyspark filter objects or trees)."""

    children: tuple

    def describe(self) -> str:
        """SQL-like text."""
        return "(" + " OR ".join(describe_filter(c) for c in self.children) + ")"


@dataclass(frozen=True, eq=False)
class And:
    """A conjunction of filters (pyspark filter objects or trees)."""

    children: tuple

    def describe(self) -> str:
        """SQL-like text."""
        return "(" + " AND ".join(describe_filter(c) for c in self.children) + ")"


@dataclass(frozen=True, eq=False)
class Opaque:
    """A predicate the source cannot translate (Spark evaluates it); restricts nothing here."""

    text: str = "?"

    def describe(self) -> str:
        """SQL-like text."""
        return f"<{self.text}>"


def is_tree(f: Any) -> bool:
    """Whether ``f`` is an :class:`Or`, :class:`And` or :class:`Opaque` node."""
    return isinstance(f, (Or, And, Opaque))


def tree_columns(f: Any) -> set[str]:
    """The (lower-case) column names a filter or tree tests."""
    if isinstance(f, (Or, And)):
        out: set[str] = set()
        for c in f.children:
            out |= tree_columns(c)
        return out
    if isinstance(f, Opaque):
        return set()
    if type(f).__name__ == "Not":
        return tree_columns(f.child)
    columns = getattr(f, "columns", None)
    if callable(columns):  # a filter over expressions (connector.decoded_filters.Compare)
        return columns()
    attribute = getattr(f, "attribute", None)
    if isinstance(attribute, tuple) and len(attribute) == 1:
        return {attribute[0].lower()}
    return set()


@dataclass
class _Pushed:
    """One node's translation: key ranges (None: unbounded), engine filter, exactness."""

    ranges: list[KeyRange] | None
    engine: Filter | None
    exact: bool


def _range_filter(ranges: list[KeyRange]) -> Filter:
    return MultiRowRangeFilter([(lo, True, hi or b"", False) for lo, hi in ranges])


def _all(filters: list[Filter]) -> Filter | None:
    if not filters:
        return None
    return filters[0] if len(filters) == 1 else FilterList.join("MUST_PASS_ALL", *filters)


def _node(f: Any, serde, column_filters: bool, superset: bool) -> _Pushed:
    if isinstance(f, Or):
        return _or(f, serde, column_filters, superset)
    children = list(f.children) if isinstance(f, And) else [f]
    result = push_tree(children, serde, column_filters, superset)
    ranges = None if result.key_ranges is None else normalize(result.key_ranges)
    return _Pushed(ranges, result.engine_filter, not result.residual)


def _or(f: Or, serde, column_filters: bool, superset: bool) -> _Pushed:
    branches = [_node(c, serde, column_filters, superset) for c in f.children]
    exact = all(b.exact for b in branches)
    live = [b for b in branches if b.ranges is None or b.ranges]  # a branch with no keys adds no rows
    if not live:
        return _Pushed([], None, exact)
    ranges: list[KeyRange] | None = []
    for b in live:
        ranges = None if ranges is None or b.ranges is None else union(ranges, b.ranges)
    if all(b.engine is None for b in live):
        return _Pushed(ranges, None, exact)  # the union of the key ranges is the OR itself
    alternatives = []
    for b in live:
        parts = []
        if b.ranges is not None and b.ranges != ranges:
            parts.append(_range_filter(b.ranges))
        if b.engine is not None:
            parts.append(b.engine)
        if not parts:
            return _Pushed(ranges, None, exact)  # this branch keeps every row the ranges hold
        alternatives.append(_all(parts))
    engine = alternatives[0] if len(alternatives) == 1 else FilterList.join("MUST_PASS_ONE", *alternatives)
    return _Pushed(ranges, engine, exact)


def push_tree(filters: Sequence[Any], serde, column_filters: bool = True, superset: bool = False) -> PushdownResult:
    """:func:`~connector.pushdown.push_filters` for conjuncts that may be OR/AND trees.

    Plain filters go to ``push_filters``; each tree narrows the key ranges
    (intersection) and adds its engine filter (``MUST_PASS_ALL``); it is
    handled only if it is exact.
    """
    plain = [f for f in filters if not is_tree(f)]
    result = push_filters(plain, serde, column_filters, superset)
    ranges = None if result.key_ranges is None else normalize(result.key_ranges)
    engine = [result.engine_filter] if result.engine_filter is not None else []
    for f in filters:
        if not is_tree(f):
            continue
        text = describe_filter(f)
        if isinstance(f, Opaque):
            result.residual.append(f)
            result.notes.append(f"{text}: left for Spark (no source form)")
            continue
        node = _node(f, serde, column_filters, superset)
        if node.ranges is not None:
            ranges = node.ranges if ranges is None else intersect(ranges, node.ranges)
        if node.engine is not None:
            engine.append(node.engine)
        how = []
        if node.ranges is not None:
            how.append(f"{len(node.ranges)} key range(s)")
        if node.engine is not None:
            how.append(f"engine filter {node.engine!r}")
        pushed = " and ".join(how) or "nothing"
        if node.exact:
            result.handled.append(f)
            result.notes.append(f"{text}: {pushed}")
        else:
            result.residual.append(f)
            result.notes.append(f"{text}: {pushed} narrow the scan; Spark checks it again")
    result.key_ranges = ranges
    result.engine_filter = _all(engine)
    return result
