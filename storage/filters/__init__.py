"""HBase filters for both scan paths, and the filter-string parser.

Every filter implements :class:`Filter`: a cell-at-a-time path
(``filter_row_key`` / ``filter_row_cells``), a vectorized batch path
(``filter_batch``) that gives the same answers, and hints for scanners
(``row_ranges``, ``filter_all_remaining``, ``columns_needed``).  See
``docs/filters.md`` for the list, the filter language and the differences
from HBase.
"""

from .base import Filter, Keep, Mode
from .cell_filters import (
    ColumnPrefixFilter,
    FirstKeyOnlyFilter,
    KeyOnlyFilter,
    QualifierFilter,
    TimestampsFilter,
    ValueFilter,
)
from .column_count import ColumnCountGetFilter, ColumnPaginationFilter
from .column_filters import ColumnRangeFilter, FamilyFilter, MultipleColumnPrefixFilter
from .column_value import SingleColumnValueFilter
from .column_value_cells import ColumnValueFilter
from .column_value_exclude import SingleColumnValueExcludeFilter
from .dependent_column import DependentColumnFilter
from .fuzzy_row import FuzzyRowFilter
from .inclusive_stop import InclusiveStopFilter
from .random_row import RandomRowFilter
from .registry import register_filter, register_filter_specs, registered_filters, unregister_filter
from .comparators import (
    BinaryComparator,
    BinaryPrefixComparator,
    Comparator,
    NullComparator,
    RegexStringComparator,
    SubstringComparator,
    Utf8Comparator,
    comparator_from_string,
)
from .compare import CompareOperator
from .filter_list import FilterList, FilterListOperator
from .page import PageFilter
from .parser import FILTER_NAMES, FilterSyntaxError, coerce_filter, parse_filter_string
from ..keys import KeyRange
from .row_filters import MultiRowRangeFilter, PrefixFilter, RowFilter, RowRange
from .wrappers import SkipFilter, WhileMatchFilter

__all__ = [
    "Filter",
    "Keep",
    "Mode",
    "PrefixFilter",
    "RowFilter",
    "MultiRowRangeFilter",
    "RowRange",
    "FirstKeyOnlyFilter",
    "KeyOnlyFilter",
    "ColumnPrefixFilter",
    "QualifierFilter",
    "SingleColumnValueFilter",
    "ColumnValueFilter",
    "ValueFilter",
    "PageFilter",
    "FamilyFilter",
    "MultipleColumnPrefixFilter",
    "ColumnRangeFilter",
    "ColumnPaginationFilter",
    "ColumnCountGetFilter",
    "DependentColumnFilter",
    "FuzzyRowFilter",
    "RandomRowFilter",
    "InclusiveStopFilter",
    "SingleColumnValueExcludeFilter",
    "TimestampsFilter",
    "FilterList",
    "FilterListOperator",
    "SkipFilter",
    "WhileMatchFilter",
    "CompareOperator",
    "Comparator",
    "BinaryComparator",
    "BinaryPrefixComparator",
    "SubstringComparator",
    "RegexStringComparator",
    "NullComparator",
    "Utf8Comparator",
    "comparator_from_string",
    "KeyRange",
    "FilterSyntaxError",
    "parse_filter_string",
    "coerce_filter",
    "FILTER_NAMES",
    "register_filter",
    "register_filter_specs",
    "registered_filters",
    "unregister_filter",
]
