"""Whether evaluating a decoded filter in the engine worker pays, decided per column from a sample.

A filter the worker evaluates on decoded rows (:mod:`connector.decoded_filters`) costs a
kernel pass over the column; it pays back by sparing the rows it drops: their other columns
are not decoded (:meth:`~connector.decoded_filters.DecodedFilter.select`), not sent to the
JVM and not filtered by Spark.  A filter that keeps almost every row (TPC-H q1's
``l_shipdate <= date '1998-09-02'`` keeps 98%) spares nothing and is pure cost, while Spark,
once it has the column, tests it for next to nothing in generated code.

So, when the JVM source's filters are pushed (the worker's ``push`` request), the plain
comparisons on each column (``=``, ``<``, ``<=``, ``>``, ``>=``, ``IN`` and the column's
``IS NOT NULL``) are tested together on a sample of the rows the read would scan: the first
rows of up to :data:`SAMPLE_SPLITS` splits spread over the scanned key space, at most
:data:`SAMPLE_ROWS` rows.  When they keep at least ``regionscan.pushdown.decoded.maxkept`` of
the sample (:data:`DEFAULT_MAX_KEPT`), they are left to Spark.  Other decoded filters (``%``,
``LIKE``, OR trees, column comparisons) stay with the worker: Spark would need more columns
for them, and they were measured at parity or better there.

The plan request, made on the driver right after the push, must evaluate every filter the
push reported handled (Spark does not check those again).  The decision is therefore kept
in this process (:func:`decided`), and a handled decision is never turned into a left one:
a plan that finds no decision for a filter takes it, which is always correct (Spark then
checks a filter the worker evaluated too).

The sampled shares are a planning statistic kept between pushes (:func:`decide`'s ``state``):
keyed on the read, its filters and the table's exact state (each region's store files,
manifest generation and WAL position), so a flush, compaction, bulk load or any write makes
the next push sample again, while a repeated query on an unchanged table decides from the
shares without decoding anything.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Sequence

import pyarrow as pa

from .decoded_filters import DecodedFilter
from .pushdown import PushdownResult, describe_filter
from .stored_dates import StoredForms, stored_group

__all__ = ["DEFAULT_MAX_KEPT", "SAMPLE_BATCH", "SAMPLE_ROWS", "SAMPLE_SPLITS", "column_groups", "decide", "decided", "follow",
           "kept_shares", "leave"]

DEFAULT_MAX_KEPT = 0.8
"""A column's plain comparisons keeping this share of the sampled rows or more are left to Spark
(measured on a 300K-row ``lineitem``: 98% kept loses in the worker, 2-15% kept wins, about 50% is
within the noise; see
docs/decisions/2026-12-05-filters-only-where-they-pay.md)."""
SAMPLE_ROWS = 16384
SAMPLE_SPLITS = 8
SAMPLE_BATCH = 2048
"""Rows per batch of the sample reader: the first batch of each sampled split is read."""
_PLAIN = ("EqualTo", "GreaterThan", "GreaterThanOrEqual", "LessThan", "LessThanOrEqual", "In", "IsNotNull")
_MEMO_SIZE = 4096
_memo: "OrderedDict[tuple, bool | str]" = OrderedDict()  # (read, a column's filters) -> True: handled, else why left
_shares: "OrderedDict[tuple, dict[str, float]]" = OrderedDict()  # (read, filters, table state) -> shares
_lock = threading.Lock()


def _column(f: Any) -> str | None:
    attribute = getattr(f, "attribute", None)
    if type(f).__name__ not in _PLAIN or not isinstance(attribute, tuple) or len(attribute) != 1:
        return None
    return attribute[0].lower()


def column_groups(decoded: Sequence[Any]) -> dict[str, list]:
    """The plain single-column decoded filters by (lower-case) column, for columns with a value
    comparison (a column's ``IS NOT NULL`` alone is no group: it costs next to nothing)."""
    groups: dict[str, list] = {}
    for f in decoded:
        name = _column(f)
        if name is not None:
            groups.setdefault(name, []).append(f)
    return {c: fs for c, fs in groups.items() if any(type(f).__name__ != "IsNotNull" for f in fs)}


def _remember(key: tuple, handled: bool | str) -> None:
    with _lock:
        if _memo.get(key) is True:
            return  # once handled, always handled: a plan may still rely on it
        _memo[key] = handled
        _memo.move_to_end(key)
        while len(_memo) > _MEMO_SIZE:
            _memo.popitem(last=False)


def _key(read: tuple, filters: Sequence[Any]) -> tuple:
    """A column's filters of a read, in any order (one ``IS NOT NULL`` may sit in many groups)."""
    return read, tuple(sorted(describe_filter(f) for f in filters))


def decided(read: tuple, filters: Sequence[Any]) -> bool | None:
    """What the last push of this read decided for one column's ``filters``: True handled, False
    left to Spark, None unknown."""
    with _lock:
        found = _memo.get(_key(read, filters))
    return None if found is None else found is True


def _why(read: tuple, filters: Sequence[Any]) -> str:
    with _lock:
        found = _memo.get(_key(read, filters))
    return found if isinstance(found, str) else "as the push decided"


def leave(result: PushdownResult, filters: Sequence[Any], why: str) -> None:
    """Move ``filters`` from the worker's decoded filters back to Spark, with a note saying why."""
    ids = {id(f) for f in filters}
    result.decoded = [f for f in result.decoded if id(f) not in ids]
    result.handled = [f for f in result.handled if id(f) not in ids]
    result.residual.extend(filters)
    texts = {describe_filter(f) + ":": describe_filter(f) for f in filters}
    notes = [n for n in result.notes if not any(n.startswith(t) for t in texts)]
    notes.extend(f"{text} left for Spark ({why})" for text in texts)
    result.notes = notes


def kept_shares(groups: dict[str, list], sample: Callable[[list[str]], list[pa.RecordBatch]]) -> dict[str, float]:
    """Per column, the share of the sampled rows its filters keep (1.0 for an empty sample).

    ``sample(names)`` returns batches of those columns decoded as Spark reads them."""
    if not groups:
        return {}
    try:
        batches = sample(sorted(groups))
    except Exception:  # noqa: BLE001 - the sample only informs a choice
        # A sample that cannot be read or decoded (a value not of its type, a damaged block)
        # decides nothing: every filter stays pushed, and the query's own read reports the
        # error from the task that meets it, as it would without the sample.
        return {}
    rows = sum(b.num_rows for b in batches)
    shares = {}
    for name, fs in groups.items():
        if not rows:
            shares[name] = 1.0
            continue
        flt = DecodedFilter(fs)
        kept = 0
        for b in batches:
            mask = flt.mask(b.select([c for c in b.schema.names if c.lower() == name]))
            kept += mask.true_count
        shares[name] = kept / rows
    return shares


def _known_shares(state: tuple | None, groups: dict[str, list],
                  sample: Callable[[list[str]], list[pa.RecordBatch]]) -> dict[str, float]:
    """The groups' shares: those sampled under the same ``state`` (None: not kept), else sampled now."""
    key = None if state is None else (state, tuple(sorted(groups)))
    if key is not None:
        with _lock:
            found = _shares.get(key)
            if found is not None:
                _shares.move_to_end(key)
                return found
    shares = kept_shares(groups, sample)
    if key is not None and len(shares) == len(groups):  # a failed sample ({}) is not kept: the next push retries
        with _lock:
            _shares[key] = shares
            while len(_shares) > _MEMO_SIZE:
                _shares.popitem(last=False)
    return shares


def decide(result: PushdownResult, read: tuple, max_kept: float,
           sample: Callable[[list[str]], list[pa.RecordBatch]], state: tuple | None = None,
           stored: StoredForms | None = None) -> None:
    """Leave to Spark each column's plain decoded filters that keep ``max_kept`` of a sample or
    more, and remember every decision for the plan (:func:`decided`).

    ``state`` identifies the read, its filters and the table's exact contents (see the module
    text); the shares sampled under one state are reused by the next push with the same state.
    ``stored`` names the columns whose date comparisons are tested on their stored cells
    (:mod:`connector.stored_dates`): such a column's filters stay with the worker whatever they
    keep, since their test decodes nothing and a query whose filters are all taken can have its
    aggregate computed by the tasks (TPC-H q1)."""
    groups = {name: fs for name, fs in column_groups(result.decoded).items() if not _tested_stored(fs, stored)}
    shares = _known_shares(state, groups, sample) if max_kept < 1.0 and groups else {}
    for name, fs in groups.items():
        share = shares.get(name, 0.0)
        # a filter this process once reported handled stays so: a plan may still rely on it
        left = share >= max_kept and not decided(read, fs)
        why = (f"keeps {share:.0%} of a sample of the rows: cheaper for Spark, which reads {name} anyway, "
               f"than a pass in the engine worker")
        _remember(_key(read, fs), why if left else True)
        if left:
            leave(result, fs, why)


def _tested_stored(group: list, stored: StoredForms | None) -> bool:
    """Whether a column's plain filters are date comparisons tested on stored cells (its implied
    ``IS NOT NULL`` aside)."""
    compared = [f for f in group if type(f).__name__ != "IsNotNull"]
    return bool(compared) and stored_group(compared, stored) is not None


def follow(result: PushdownResult, read: tuple) -> None:
    """Leave to Spark the decoded filters the last push of this read left (a plan's decision:
    a filter with no decision stays with the worker)."""
    for fs in column_groups(result.decoded).values():
        if decided(read, fs) is False:
            leave(result, fs, _why(read, fs))
