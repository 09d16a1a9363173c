"""Every parser raises only its own error type, with a position, whatever the input.

The parsers are the filter language (FilterSyntaxError), Hive's
hbase.columns.mapping with columns.types, the hbase-spark mapping string, the
JSON catalog (MappingError) and bounded JSON (JsonLimitError).  The known
foreign errors are pinned as cases (``"²"`` digits, 4,300-digit integers,
OverflowError, lone surrogates, nesting 250 to 1,000 deep); hypothesis then
fuzzes each parser with text built from its own vocabulary, bounded in time.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from serde.errors import MappingError
from serde.mapping.catalog import parse_catalog
from serde.mapping.hive import parse_hive_mapping
from serde.mapping.spark import parse_spark_mapping
from storage.filters import FilterSyntaxError, parse_filter_string
from storage.jsonlimits import JsonLimitError, loads_bounded

FUZZ = settings(
    max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)

_WEIRD = ["²", "٣", "9" * 30, "9" * 5000, "-", "\ud800", "\udcff", "\x00", "\n", " ", "'", '"', "`", "\\"]


def _vocabulary(words: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(st.text(max_size=60), st.lists(st.sampled_from(words + _WEIRD), max_size=50).map("".join))


def _check(error: BaseException, own: type) -> None:
    assert isinstance(error, own), f"{type(error).__name__}: {error}"
    assert error.position is not None
    assert len(str(error)) < 1200  # positions and echoes are bounded, whatever the input


def _raises_own(parse, own: type, *args) -> None:
    try:
        parse(*args)
    except own as exc:
        _check(exc, own)


# -- pinned cases ------------------------------------------------------------------

_DEEP = 1000


@pytest.mark.parametrize(
    "text",
    [
        "PageFilter (²)",
        "PageFilter (" + "9" * 4300 + ")",
        "TimestampsFilter (1, 9999999999999999999)",
        "TimestampsFilter (-9999999999999999999)",
        "PrefixFilter ('\ud800')",
        "(" * 250 + "PageFilter (1)" + ")" * 250,
        "(" * _DEEP + "PageFilter (1)" + ")" * _DEEP,
        "SKIP " * _DEEP + "PageFilter (1)",
        "WHILE " * 300 + "PageFilter (1)",
        "PrefixFilter ('a') AND " * 2000 + "(" * 300,
    ],
)
def test_filter_parser_foreign_errors_are_its_own(text):
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter_string(text)
    _check(info.value, FilterSyntaxError)


def test_filter_integers_span_the_64_bit_range():
    assert parse_filter_string("TimestampsFilter (0, 9223372036854775807)").timestamps == (0, 2**63 - 1)
    with pytest.raises(FilterSyntaxError, match="64-bit"):
        parse_filter_string("TimestampsFilter (9223372036854775808)")


@pytest.mark.parametrize(
    "args",
    [
        (":key,cf:a", None, "string:" + "array<" * _DEEP + "int" + ">" * _DEEP),
        (":key,cf:a", None, "string:map<string," * 250 + "int" + ">" * 250),
        (":key,cf:a", None, "string:char(" + "9" * 4300 + ")"),
        (":key,cf:a", None, "string:decimal(²)"),
        (":key,cf:\ud800",),
        (":key,cf:a", "k,\udcff"),
    ],
)
def test_hive_mapping_foreign_errors_are_its_own(args):
    with pytest.raises(MappingError) as info:
        parse_hive_mapping(*args)
    _check(info.value, MappingError)


@pytest.mark.parametrize(
    "text",
    [
        "k STRING :key, a " + "array<" * _DEEP + "int" + ">" * _DEEP + " cf:a",
        "k STRING :key, a DECIMAL(" + "9" * 4300 + ") cf:a",
        "k STRING :key, a CHAR(³) cf:a",
        "k STRING :key, a INT cf:\ud800",
    ],
)
def test_spark_mapping_foreign_errors_are_its_own(text):
    with pytest.raises(MappingError) as info:
        parse_spark_mapping(text)
    _check(info.value, MappingError)


def _catalog(**column) -> str:
    return json.dumps(
        {"rowkey": "k", "columns": {"k": {"cf": "rowkey", "col": "k", "type": "string"}, "a": {"cf": "cf", "col": "a", **column}}}
    )


@pytest.mark.parametrize(
    "text",
    [
        "[" * _DEEP + "]" * _DEEP,
        '{"rowkey": ' + "[" * 300 + "]" * 300 + "}",
        '{"rowkey": "k", "columns": ' + "9" * 4300 + "}",
        _catalog(type="string", length="²"),
        _catalog(type="string", length=2**70),
        _catalog(type="array<" * 300 + "int" + ">" * 300),
        _catalog(type="decimal(" + "9" * 5000 + ")"),
        '{"rowkey": "k", "rowkey_delimiter": "\\ud800", "columns": {"k": {"cf": "rowkey", "col": "k"}}}',
        '{"rowkey": "k", "columns": {"k": {"cf": "rowkey", "col": "k"}, "a": {"cf": "cf", "col": "\\ud800"}}}',
        b"\xff\xfe".decode("latin-1"),
    ],
)
def test_catalog_foreign_errors_are_its_own(text):
    with pytest.raises(MappingError) as info:
        parse_catalog(text)
    _check(info.value, MappingError)


_HUGE = 10**5000  # past Python's 4,300-digit limit on int-to-text: printing it raises ValueError


@pytest.mark.parametrize(
    "doc",
    [
        json.loads(_catalog(type="string")) | {"rowkey": _HUGE},
        {"rowkey": "k", "columns": _HUGE},
        {"rowkey": "k", "columns": {_HUGE: {"cf": "rowkey", "col": "k"}}},
        {"rowkey": "k", "columns": {"k": {"cf": "rowkey", "col": "k", "length": _HUGE}}},
        {"rowkey": "k", "columns": {"k": {"cf": "rowkey", "col": "k"}, "a": {"cf": _HUGE, "col": "a"}}},
        {"rowkey": "k", "columns": {"k": {"cf": "rowkey", "col": "k"}, "a": {"cf": "cf", "col": "a", "avro": [-_HUGE]}}},
        {"table": {"name": _HUGE}, "rowkey": "k", "columns": {"k": {"cf": "rowkey", "col": "k"}}},
        {"rowkey": "k", "columns": {"k": {"cf": "rowkey", "col": "k", "length": 2**63}}},
    ],
)
def test_catalog_dicts_with_huge_numbers_fail_as_its_own(doc):
    """A catalog given as a dict (SHC's parsed form) holding a huge number: one line, the parser's error."""
    with pytest.raises(MappingError) as info:
        parse_catalog(doc)
    _check(info.value, MappingError)
    assert "\n" not in str(info.value) and "integer" in str(info.value)


def test_bounded_json_counts_nesting_outside_strings_only():
    assert loads_bounded('{"a": "[[[[[[[[[[[[[[[[[[[["}', 2) == {"a": "[" * 20}
    with pytest.raises(JsonLimitError) as info:
        loads_bounded('{"a": [[1]]}', 2)
    assert info.value.position == 7
    with pytest.raises(JsonLimitError) as info:
        loads_bounded('{"a": "9", "b": ' + "9" * 25 + "}", 8)
    assert info.value.position == 16
    assert loads_bounded("[-9223372036854775808]", 2) == [-(2**63)]


# -- fuzzing -------------------------------------------------------------------------

_FILTER_WORDS = [
    "PrefixFilter", "PageFilter", "TimestampsFilter", "SingleColumnValueFilter", "ValueFilter", "ColumnValueFilter",
    "MultiRowRangeFilter", "KeyOnlyFilter", "(", ")", ",", "'a'", "'binary:x'", "'regexstring:[a'",
    "1", "-1", "true", "false", "AND", "OR", "SKIP", "WHILE", "=", "!=", "<=", ">", "NO_OP",
]
_TYPE_WORDS = ["string", "int", "bigint", "decimal(", "char(", "array<", "map<", "struct<", "a:", ">", ",", ")", "10"]
_SPEC_WORDS = [":key", ":timestamp", "cf:a", "cf:", "#b", "#s", "#o", "#b:s", ",", ":", "#"]


@FUZZ
@given(_vocabulary(_FILTER_WORDS))
def test_fuzz_filter_parser(text):
    _raises_own(parse_filter_string, FilterSyntaxError, text)


@FUZZ
@given(_vocabulary(_SPEC_WORDS), st.one_of(st.none(), _vocabulary(["k", "a", ","])), st.one_of(st.none(), _vocabulary(_TYPE_WORDS)))
def test_fuzz_hive_mapping(mapping, columns, types):
    _raises_own(parse_hive_mapping, MappingError, mapping, columns, types)


@FUZZ
@given(_vocabulary(_SPEC_WORDS + _TYPE_WORDS + ["k ", "`k` ", "STRING ", "INT "]))
def test_fuzz_spark_mapping(text):
    _raises_own(parse_spark_mapping, MappingError, text)


_JSON_WORDS = [
    "{", "}", "[", "]", ":", ",", '"rowkey"', '"columns"', '"k"', '"cf"', '"col"', '"type"', '"length"',
    '"rowkey_delimiter"', '"table"', '"string"', '"int"', '"array<int>"', "1", "-1", "true", "null", '"\\ud800"',
]


@FUZZ
@given(st.one_of(_vocabulary(_JSON_WORDS), st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["rowkey", "columns", "k", "cf", "col", "type", "length", "table"]), inner, max_size=4)),
    max_leaves=20,
).map(json.dumps)))
def test_fuzz_catalog(text):
    _raises_own(parse_catalog, MappingError, text)


_CATALOG_KEYS = ["rowkey", "columns", "k", "a", "cf", "col", "type", "length", "table", "name", "avro"]
# drawn as exponents: hypothesis prints its strategies, and a 5,000-digit literal cannot be printed
_HUGE_INTS = st.sampled_from([5000, 4400, 19]).map(lambda digits: 10**digits) | st.just(63).map(lambda b: -(2**b) - 1)


@FUZZ
@given(st.dictionaries(
    st.sampled_from(_CATALOG_KEYS),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), _HUGE_INTS, st.sampled_from(["k", "rowkey"]),
                  st.text(max_size=8)),
        lambda inner: st.one_of(st.lists(inner, max_size=4),
                                st.dictionaries(st.one_of(st.sampled_from(_CATALOG_KEYS), _HUGE_INTS), inner,
                                                max_size=4)),
        max_leaves=20),
    max_size=4))
def test_fuzz_catalog_dicts(doc):
    _raises_own(parse_catalog, MappingError, doc)
