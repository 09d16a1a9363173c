"""Compare operators of the filters that test a value against a comparator.

The operator names and meaning are HBase's ``CompareOperator``: the filter
passes a value when ``value <op> comparator-value`` holds, with the
comparator deciding what "less" and "equal" mean (see
:mod:`storage.filters.comparators`).  ``NO_OP`` passes nothing, as in
HBase's ``CompareFilter``.
"""

from __future__ import annotations

from enum import Enum

from ..errors import InvalidArgument

__all__ = ["CompareOperator", "to_operator"]


class CompareOperator(Enum):
    """HBase compare operators; ``value`` is the filter-language symbol."""

    LESS = "<"
    LESS_OR_EQUAL = "<="
    EQUAL = "="
    NOT_EQUAL = "!="
    GREATER_OR_EQUAL = ">="
    GREATER = ">"
    NO_OP = "NO_OP"

    @property
    def symbol(self) -> str:
        """The spelling in the filter language (``NO_OP`` has no symbol)."""
        return self.value

    def holds(self, sign: int) -> bool:
        """Whether the operator accepts a comparison whose result has ``sign``.

        ``sign`` is negative, zero or positive as the stored value is less
        than, equal to or greater than the comparator's value.
        """
        return _HOLDS[self](sign)


_HOLDS = {
    CompareOperator.LESS: lambda s: s < 0,
    CompareOperator.LESS_OR_EQUAL: lambda s: s <= 0,
    CompareOperator.EQUAL: lambda s: s == 0,
    CompareOperator.NOT_EQUAL: lambda s: s != 0,
    CompareOperator.GREATER_OR_EQUAL: lambda s: s >= 0,
    CompareOperator.GREATER: lambda s: s > 0,
    CompareOperator.NO_OP: lambda s: False,
}

_BY_NAME = {op.name: op for op in CompareOperator}
_BY_SYMBOL = {op.value: op for op in CompareOperator}


def to_operator(op: CompareOperator | str) -> CompareOperator:
    """Accept a :class:`CompareOperator`, its name (``"LESS"``) or symbol (``"<"``)."""
    if isinstance(op, CompareOperator):
        return op
    if isinstance(op, str):
        found = _BY_SYMBOL.get(op) or _BY_NAME.get(op.upper())
        if found is not None:
            return found
    raise InvalidArgument(
        f"compare operator {op!r} is not one of "
        + ", ".join(o.value for o in CompareOperator)
        + " or their names (LESS, EQUAL, ...)"
    )
