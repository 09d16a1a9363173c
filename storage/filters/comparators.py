"""Comparators: how a filter compares stored bytes with its value.

Each comparator answers for one operator in two forms that must agree:
:meth:`Comparator.predicate` gives a ``bytes -> bool`` function for the
cell path, :meth:`Comparator.mask` a NumPy boolean mask over a whole Arrow
binary array for the batch path.

HBase names and meaning:

* ``binary:`` -- :class:`BinaryComparator`, lexicographic order of unsigned bytes.
* ``binaryprefix:`` -- :class:`BinaryPrefixComparator`, the same on the stored
  bytes cut to the length of the comparator's value.
* ``substring:`` -- :class:`SubstringComparator`, "equal" when the value
  contains the substring, ignoring ASCII case.
* ``regexstring:`` -- :class:`RegexStringComparator`, "equal" when the regex
  matches anywhere in the value (see :mod:`storage.filters._regex`).
* ``null:`` -- :class:`NullComparator`: a stored value is never null, so
  every value compares "less" (HBase's filter language has no form for it;
  this one is the project's).
* ``utf8:`` -- :class:`Utf8Comparator`, the project's too: another comparator
  (``utf8:binary:abc``) over values that must be valid UTF-8.  A tested value
  that is not fails the scan with :class:`NotUtf8` instead of being compared,
  so a filter on a text column drops no row that a read of it would refuse.

For the two matching comparators, as in HBase, a match compares "equal" and
a miss compares "less", so ``=``/``>=`` select matches, ``!=``/``<`` misses,
``<=`` everything and ``>`` nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import operator
from functools import partial
from typing import Callable, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidArgument
from ..kernels.cell_columns import bools, value_offsets
from ._regex import compile_regex, re2_pattern
from ._text import to_bytes, to_text
from .compare import CompareOperator, to_operator

__all__ = [
    "Comparator",
    "BinaryComparator",
    "BinaryPrefixComparator",
    "SubstringComparator",
    "RegexStringComparator",
    "NullComparator",
    "Utf8Comparator",
    "NotUtf8",
    "check_utf8",
    "comparator_from_string",
    "COMPARATORS",
]

Predicate = Callable[[bytes], bool]

# predicate(op) for binary order, built from C-level operator functions with
# the comparator's value bound first: ``value > x`` is ``x < value``.
_BOUND = {
    CompareOperator.LESS: operator.gt,
    CompareOperator.LESS_OR_EQUAL: operator.ge,
    CompareOperator.EQUAL: operator.eq,
    CompareOperator.NOT_EQUAL: operator.ne,
    CompareOperator.GREATER_OR_EQUAL: operator.le,
    CompareOperator.GREATER: operator.lt,
}
_KERNEL = {
    CompareOperator.LESS: pc.less,
    CompareOperator.LESS_OR_EQUAL: pc.less_equal,
    CompareOperator.EQUAL: pc.equal,
    CompareOperator.NOT_EQUAL: pc.not_equal,
    CompareOperator.GREATER_OR_EQUAL: pc.greater_equal,
    CompareOperator.GREATER: pc.greater,
}


def _never(_: bytes) -> bool:
    return False


def _always(_: bytes) -> bool:
    return True


def _to_numpy(mask: pa.Array) -> np.ndarray:
    # A null value (a dense column's absent cell) compares as False here, so
    # callers mask absent cells out afterwards instead of copying the values
    # to fill them; a boolean array with nulls would become an object array.
    # ``bools`` unpacks a null-free result's bitmap directly (to_numpy costs
    # about half of a short-value equality test).
    return bools(mask)


class Comparator(ABC):
    """Base class: a value and a way to compare stored bytes with it."""

    prefix: ClassVar[str]  # the filter-language prefix, e.g. "binary"

    def __init__(self, value: bytes | str):
        self.value = to_bytes(value, f"{type(self).__name__} value")

    @abstractmethod
    def predicate(self, op: CompareOperator | str) -> Predicate:
        """A function telling whether stored bytes ``x`` satisfy ``x <op> self``."""

    @abstractmethod
    def mask(self, data: pa.Array, op: CompareOperator | str) -> np.ndarray:
        """Boolean mask of the elements of the binary array ``data`` satisfying ``op``."""

    def to_string(self) -> str:
        """The filter-language form, e.g. ``binary:abc``."""
        return f"{self.prefix}:{to_text(self.value)}"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.value == self.value

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.value))

    def __deepcopy__(self, memo: dict) -> "Comparator":
        return self  # immutable, so filter copies share it (and its compiled regex)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"


class BinaryComparator(Comparator):
    """Lexicographic comparison of unsigned bytes (HBase ``BinaryComparator``)."""

    prefix = "binary"

    def predicate(self, op: CompareOperator | str) -> Predicate:
        op = to_operator(op)
        if op is CompareOperator.NO_OP:
            return _never
        return partial(_BOUND[op], self.value)

    def mask(self, data: pa.Array, op: CompareOperator | str) -> np.ndarray:
        op = to_operator(op)
        if op is CompareOperator.NO_OP:
            return np.zeros(len(data), dtype=bool)
        return _to_numpy(_KERNEL[op](data, pa.scalar(self.value, pa.binary())))


class BinaryPrefixComparator(Comparator):
    """Binary comparison of the stored bytes cut to the value's length."""

    prefix = "binaryprefix"

    def predicate(self, op: CompareOperator | str) -> Predicate:
        op = to_operator(op)
        if op is CompareOperator.NO_OP:
            return _never
        n = len(self.value)
        test = partial(_BOUND[op], self.value)
        return lambda x: test(x[:n])

    def mask(self, data: pa.Array, op: CompareOperator | str) -> np.ndarray:
        op = to_operator(op)
        if op is CompareOperator.NO_OP:
            return np.zeros(len(data), dtype=bool)
        if op in (CompareOperator.EQUAL, CompareOperator.NOT_EQUAL):
            # equality needs no cut copy of every value: one prefix test
            found = _to_numpy(pc.starts_with(data, self.value))
            return found if op is CompareOperator.EQUAL else ~found
        head = pc.binary_slice(data, 0, len(self.value))
        return _to_numpy(_KERNEL[op](head, pa.scalar(self.value, pa.binary())))


class _MatchComparator(Comparator):
    """A comparator that only knows "matches" (compares equal) or not (less)."""

    @abstractmethod
    def _matches(self, x: bytes) -> bool:
        ...

    @abstractmethod
    def _match_mask(self, data: pa.Array) -> np.ndarray:
        ...

    def _selects(self, op: CompareOperator | str) -> tuple[bool, bool]:
        op = to_operator(op)
        return op.holds(0), op.holds(-1)  # (passes matches, passes misses)

    def predicate(self, op: CompareOperator | str) -> Predicate:
        on_match, on_miss = self._selects(op)
        if on_match and on_miss:
            return _always
        if on_match:
            return self._matches
        if on_miss:
            return lambda x: not self._matches(x)
        return _never

    def mask(self, data: pa.Array, op: CompareOperator | str) -> np.ndarray:
        on_match, on_miss = self._selects(op)
        if on_match == on_miss:
            return np.full(len(data), on_match, dtype=bool)
        found = self._match_mask(data)
        return found if on_match else ~found


class SubstringComparator(_MatchComparator):
    """Matches values containing the substring, ignoring ASCII case.

    HBase lower-cases with Java's Unicode rules; here only ``A-Z`` fold, the
    same in both scan paths.  The value is stored lower-cased, as in HBase.
    """

    prefix = "substring"

    def __init__(self, value: bytes | str):
        super().__init__(value)
        self.value = self.value.lower()  # bytes.lower() folds ASCII only
        self._folds = self.value != self.value.upper()  # holds an ASCII letter

    def _matches(self, x: bytes) -> bool:
        return self.value in x.lower()

    def _match_mask(self, data: pa.Array) -> np.ndarray:
        if not self._folds:
            # no letter in the substring: case cannot matter, and the values need no lowered copy
            return _to_numpy(pc.match_substring(data, self.value))
        # ascii_lower only rewrites bytes A-Z, so viewing binary data as
        # string (no UTF-8 validation happens on a view) is safe here.
        lowered = pc.ascii_lower(data.view(pa.string())).view(pa.binary())
        return _to_numpy(pc.match_substring(lowered, self.value))


class RegexStringComparator(_MatchComparator):
    """Matches values in which the regular expression finds a match.

    The pattern must be valid for both RE2 and Python's re (see
    :mod:`storage.filters._regex`); a pattern either refuses raises
    InvalidArgument.
    """

    prefix = "regexstring"

    def __init__(self, value: bytes | str):
        super().__init__(value)
        self._compiled = compile_regex(self.value)
        self._search = self._compiled.search

    def _matches(self, x: bytes) -> bool:
        return self._search(x) is not None

    def _match_mask(self, data: pa.Array) -> np.ndarray:
        return _to_numpy(pc.match_substring_regex(data, re2_pattern(self.value)))



class NullComparator(_MatchComparator):
    """HBase's ``NullComparator``: "equal" only to a null value.

    Stored values are never null (an empty value is not null either, as in
    HBase), so every value compares "less": ``<``, ``<=`` and ``!=`` keep
    every cell, ``=``, ``>=`` and ``>`` none.
    """

    prefix = "null"

    def __init__(self, value: bytes | str = b""):
        super().__init__(value)
        if self.value:
            raise InvalidArgument(f"NullComparator takes no value, got {to_text(self.value)!r} (write 'null:')")

    def _matches(self, x: bytes) -> bool:
        return False

    def _match_mask(self, data: pa.Array) -> np.ndarray:
        return np.zeros(len(data), dtype=bool)


class NotUtf8(InvalidArgument):
    """A value tested by a :class:`Utf8Comparator` is not valid UTF-8.

    ``value`` is the stored bytes and ``position`` its index in the tested array (None on the
    cell path); filters that know the row re-raise it naming the row and column
    (:func:`not_utf8`).
    """

    def __init__(self, value: bytes, position: int | None, where: str = ""):
        self.value = value
        self.position = position
        shown = value if len(value) <= 64 else value[:64] + b"..."
        super().__init__(f"cannot decode {where or 'a value'}: value {shown!r} (not valid UTF-8, which the column's "
                         f"text type requires)")


def not_utf8(exc: NotUtf8, column: bytes, row: bytes) -> NotUtf8:
    """``exc`` again, naming the ``family:qualifier`` column and the row of the value."""
    return NotUtf8(exc.value, exc.position, f"column {column.decode('utf-8', 'replace')!r} of row {row!r}")


def _first_not_utf8(data: pa.Array) -> int:
    """The index of the first value of ``data`` that is not valid UTF-8 (the failure path only)."""
    for i, value in enumerate(data.to_pylist()):
        if value is None:
            continue
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return i
    raise AssertionError("Arrow refused the array as UTF-8 but every value decodes")


def _all_ascii(data: pa.Array) -> bool:
    """Whether every byte from the first value of the binary array ``data`` to past its last
    is below 0x80 (then every value is ASCII, so valid UTF-8): one vectorized pass over the
    bytes, about 30x cheaper than Arrow's UTF-8 validation of the same values.  A null slot's
    bytes count too, so False only means "not known": the exact check follows."""
    if not isinstance(data, pa.Array) or not (pa.types.is_binary(data.type) or pa.types.is_large_binary(data.type)):
        return False
    if not len(data) or data.buffers()[2] is None:
        return True
    offsets = value_offsets(data)
    first, last = int(offsets[0]), int(offsets[-1])
    if last == first:
        return True
    return int(np.frombuffer(data.buffers()[2], dtype=np.uint8, count=last - first, offset=first).max()) < 0x80


def check_utf8(data: pa.Array) -> None:
    """Raise :class:`NotUtf8` (naming the first bad value and its position) unless every
    non-null value of the binary array ``data`` is valid UTF-8.  Values of ASCII bytes (the
    common case) are settled by one pass over their bytes; others by Arrow's C++ validation
    (one cast, no copy of the data, the result not kept)."""
    if _all_ascii(data):
        return
    try:
        data.cast(pa.large_string() if pa.types.is_large_binary(data.type) else pa.string())
    except pa.ArrowInvalid:
        at = _first_not_utf8(data)
        raise NotUtf8(data[at].as_py(), at) from None


class Utf8Comparator(Comparator):
    """Another comparator over values that must be valid UTF-8 (``utf8:binary:abc``).

    The values are checked over the whole tested array (:func:`check_utf8`: ASCII bytes by
    one pass, others by Arrow's C++ UTF-8 validation), then compared by the inner comparator; a value that
    is not valid UTF-8 raises :class:`NotUtf8`, so it fails the scan rather than being
    dropped (or kept) by a comparison of bytes that no text reader would accept.
    """

    prefix = "utf8"

    def __init__(self, value: bytes | str | Comparator):
        inner = value if isinstance(value, Comparator) else comparator_from_string(value)
        if isinstance(inner, Utf8Comparator):
            inner = inner.inner
        self.inner = inner
        # the inner value is bytes, text or not: its filter-language form carries bytes that
        # are not UTF-8 as escaped surrogates (storage.filters._text), encoded back here
        self.value = to_bytes(inner.to_string(), "utf8: comparator")

    def predicate(self, op: CompareOperator | str) -> Predicate:
        test = self.inner.predicate(op)

        def checked(x: bytes) -> bool:
            try:
                x.decode("utf-8")
            except UnicodeDecodeError:
                raise NotUtf8(x, None) from None
            return test(x)

        return checked

    def mask(self, data: pa.Array, op: CompareOperator | str) -> np.ndarray:
        check_utf8(data)
        return self.inner.mask(data, op)

    def to_string(self) -> str:
        return f"{self.prefix}:{self.inner.to_string()}"


COMPARATORS: dict[str, type[Comparator]] = {
    c.prefix: c
    for c in (BinaryComparator, BinaryPrefixComparator, SubstringComparator, RegexStringComparator, NullComparator, Utf8Comparator)
}
"""Filter-language prefix -> comparator class."""


def comparator_from_string(spec: bytes | str) -> Comparator:
    """Build a comparator from ``prefix:value`` (``binary:abc``, ``substring:x``...)."""
    raw = to_bytes(spec, "comparator")
    prefix, sep, value = raw.partition(b":")
    cls = COMPARATORS.get(prefix.decode("ascii", "replace").lower()) if sep else None
    if cls is None:
        raise InvalidArgument(
            f"comparator {to_text(raw)!r} must start with one of "
            + ", ".join(f"{p}:" for p in COMPARATORS)
        )
    return cls(value)
