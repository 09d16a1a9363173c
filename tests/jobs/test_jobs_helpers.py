"""The jobs' building blocks, without Spark: progress, argument parsing, text escapes,
part-file formats, the output committer, the TSV parser, family renames, bad arguments."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import random
from decimal import Decimal

import pyarrow as pa
import pytest

from connector.options import to_bytes_binary, to_string_binary
from storage.errors import InvalidArgument
from storage.vfs.fs import FileSystem

from jobs import cell_counter, copy_table, export, import_, import_tsv, profile_serde, row_counter
from jobs._args import parse_defines, time_range_of
from jobs._binary_text import escape_binary, unescape_binary
from jobs._formats import EXTENSIONS, FORMATS, PartWriter, check_format, read_part
from jobs._output import OutputDir, Sink
from jobs._progress import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


# -- progress -----------------------------------------------------------------------
def test_progress_draws_rate_and_eta_on_a_terminal_and_ends_with_a_summary(capsys):
    stream = _Tty()
    p = Progress("count t", total_tasks=4, stream=stream, interval=0.0)
    p.update(1000, 2_000_000, 1)
    line = stream.getvalue().split("\r")[-1]
    assert "count t: 1,000 rows" in line and "2.0 MB" in line and "tasks 1/4" in line
    assert "25%" in line and "ETA" in line and "rows/s" in line
    p.add(500, 0, 1)
    line = stream.getvalue().split("\r")[-1]
    assert "1,500 rows" in line and "tasks 2/4" in line and "50%" in line
    summary = p.finish()
    assert summary.startswith("count t: 1,500 rows, 2.0 MB in ")
    assert "2 task(s)" in summary
    assert capsys.readouterr().out.strip() == summary
    assert stream.getvalue().split("\r")[-2].strip() == ""  # the bar was wiped before the summary


def test_progress_without_a_total_shows_counts_and_time_only():
    stream = _Tty()
    p = Progress("scan", stream=stream, interval=0.0, unit="cells")
    p.add(2000, 3_000_000)
    line = stream.getvalue().split("\r")[-1]
    assert line.startswith("scan: 2,000 cells  3.0 MB  ") and "cells/s" in line and "%" not in line
    p.close()
    assert stream.getvalue().split("\r")[-2].strip() == ""


def test_progress_prints_nothing_but_the_summary_off_a_terminal(capsys):
    stream = io.StringIO()
    p = Progress("job", stream=stream, interval=0.0)
    for _ in range(100):
        p.add(10, 100)
    assert stream.getvalue() == ""
    p.finish()
    assert capsys.readouterr().out.startswith("job: 1,000 rows, 10.0 kB in ")


# -- arguments ------------------------------------------------------------------------
def test_row_counter_ranges_parse_merge_and_reject_bad_ones():
    assert row_counter.parse_ranges([]) is None
    assert row_counter.parse_ranges(["a,c", "b,d;x,"]) == [(b"a", b"d"), (b"x", None)]
    assert row_counter.parse_ranges([",\\x00\\x01"]) == [(b"", b"\x00\x01")]
    for bad in (["b,a"], ["abc"], ["a,b,c"], [";"]):
        with pytest.raises(InvalidArgument):
            row_counter.parse_ranges(bad)


def test_time_range_defines_and_filters():
    assert time_range_of(None, None) is None
    assert time_range_of("5", None)[0] == 5
    assert time_range_of(None, "9") == (0, 9)
    for start, end in (("x", None), ("-1", None), ("9", "5")):
        with pytest.raises(InvalidArgument):
            time_range_of(start, end)
    assert parse_defines(["a=1", "-Db=x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(InvalidArgument):
        parse_defines(["novalue"])
    assert cell_counter.row_filter(None) == "KeyOnlyFilter()"
    assert cell_counter.row_filter("^ab'c") == "RowFilter(=, 'regexstring:^ab''c') AND KeyOnlyFilter()"
    assert cell_counter.row_filter("pre") == "PrefixFilter('pre') AND KeyOnlyFilter()"


def test_copy_table_family_renames():
    assert copy_table.parse_families(None) is None
    assert copy_table.parse_families("a:b, c") == {"a": "b", "c": "c"}
    for bad in ("a:b,a:c", "a,,b", "a:"):
        with pytest.raises(InvalidArgument):
            copy_table.parse_families(bad)
    cells = pa.table({"row": [b"r", b"r", b"s"], "family": [b"a", b"c", b"a"], "qualifier": [b"q"] * 3})
    out = copy_table.rename_families(cells, {b"a": b"z"})
    assert out.column("family").to_pylist() == [b"z", b"c", b"z"]


def test_profile_predicates_are_typed_by_their_column():
    types = {"n": "int", "d": "date", "s": "string", "x": "double"}
    assert profile_serde.parse_predicate("n >= 5", types) == ("n", ">=", 5)
    assert profile_serde.parse_predicate("d = 2021-02-03", types) == ("d", "==", dt.date(2021, 2, 3))
    assert profile_serde.parse_predicate("s != 'a b'", types) == ("s", "!=", "a b")
    for bad, message in (
        # the operator is named, not half of it taken for the value ("'> 5' is not a int")
        ("n >> 5", "'>>' is not an operator (ops == != < <= > >=) in 'n >> 5'; did you mean '>'?"),
        ("n <> 5", "'<>' is not an operator (ops == != < <= > >=) in 'n <> 5'; did you mean '!='?"),
        ("n => 5", "did you mean '>='?"),
        ("zz > 1", "no column 'zz'"),
        ("n > abc", "--predicate: 'abc' is not a value of type int"),
    ):
        with pytest.raises(InvalidArgument) as caught:
            profile_serde.parse_predicate(bad, types)
        assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("module, argv, message", [
    (row_counter, ["t", "--range", "b,a"], "stop row must sort after"),
    (row_counter, ["t", "--starttime", "9", "--endtime", "3"], "--endtime"),
    (cell_counter, ["t", "out", ""], "SEPARATOR"),
    (import_tsv, ["t", "in.tsv"], "importtsv.columns is required"),
    (import_tsv, ["-Dimporttsv.columns=cf:a,cf:b", "t", "in.tsv"], "HBASE_ROW_KEY"),
    (import_tsv, ["-Dimporttsv.columns=HBASE_ROW_KEY,cf:a", "-Dimporttsv.separator=ab", "t", "x"], "single byte"),
    (export, ["t", "out", "--versions", "0"], "--versions"),
    (export, ["t", "out", "--serde", "binary"], "need --mapping"),
    (copy_table, ["t"], "the target is the source table"),
    (copy_table, ["--new.name=u", "--versions=0", "t"], "--versions"),
    (profile_serde, ["t", "--mapping", "k STRING :key", "--paths", "row,fast"], "--paths"),
])
def test_bad_arguments_exit_2_with_a_message_before_spark_starts(module, argv, message, tmp_path, capsys):
    assert module.main(["--root", str(tmp_path)] + argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_a_missing_table_is_a_one_line_failure(tmp_path, capsys):
    assert copy_table.main(["--root", str(tmp_path), "--new.name=u", "nope"]) == 1
    err = capsys.readouterr().err
    assert "copy_table: failed: table nope does not exist" in err


# -- Bytes.toStringBinary over arrays ----------------------------------------------------
def test_escape_and_unescape_match_hbase_bytes_helpers():
    rng = random.Random(7)
    values = [bytes(rng.randrange(256) for _ in range(rng.randrange(9))) for _ in range(500)]
    values += [b"plain", b"back\\slash", b"", None, b"\\x41"]
    arr = pa.array(values, pa.binary())
    escaped = escape_binary(arr)
    assert escaped.to_pylist() == [None if v is None else to_string_binary(v) for v in values]
    assert unescape_binary(escaped).to_pylist() == values
    text = pa.array(["a\\x4", "\\xzz", "\\x41\\x42", "x\\", "\\x0a"])
    assert unescape_binary(text).to_pylist() == [to_bytes_binary(t) for t in text.to_pylist()]


# -- formats --------------------------------------------------------------------------
def _typed_table() -> pa.Table:
    return pa.table({
        "k": pa.array([b"\x00a", b"b", b"c\\"], pa.binary()),
        "s": pa.array(["a", "", None]),
        "i": pa.array([1, None, -3], pa.int32()),
        "d": pa.array([dt.date(2020, 1, 1), None, dt.date(1969, 12, 31)]),
        "ts": pa.array([dt.datetime(2020, 1, 1, 1, 2, 3, 456789), None, None]),
        "dec": pa.array([Decimal("1.23"), None, Decimal("-0.50")], pa.decimal128(5, 2)),
        "m": pa.array([[("a", 1)], None, []], pa.map_(pa.string(), pa.int64())),
    })


@pytest.mark.parametrize("fmt", FORMATS)
def test_part_files_round_trip_every_type(fmt, tmp_path):
    table = _typed_table()
    if fmt == "csv":
        with pytest.raises(InvalidArgument, match="nested"):
            check_format(fmt, table.schema)
        table = table.drop_columns(["m"])
    check_format(fmt, table.schema)
    fs = FileSystem(str(tmp_path))
    name = "part" + EXTENSIONS[fmt]
    writer = PartWriter(fmt, Sink(fs, name), table.schema)
    for batch in table.to_batches(max_chunksize=2):
        writer.write(batch)
    writer.close()
    back = pa.concat_tables(read_part(fmt, fs.open_read(name), table.schema))
    assert back.equals(table)
    with pytest.raises(InvalidArgument, match="lacks column"):
        list(read_part(fmt, fs.open_read(name), pa.schema([("nope", pa.string())])))


# -- output committer ------------------------------------------------------------------
def test_output_dir_commits_parts_at_once_and_abort_leaves_nothing(tmp_path):
    out = OutputDir(str(tmp_path / "out"))
    out.prepare()
    fs = out.fs()
    fs.write_bytes(out.task_path("part-1"), b"one")
    assert fs.listdir("") == ["_temporary"]  # nothing visible before the commit
    out.commit(["part-1"])
    assert fs.listdir("") == ["_SUCCESS", "part-1"]
    with pytest.raises(InvalidArgument, match="not empty"):
        OutputDir(str(tmp_path / "out")).prepare()
    again = OutputDir(str(tmp_path / "out"))
    again.prepare(overwrite=True)
    fs.write_bytes(again.task_path("part-2"), b"two")
    again.commit(["part-2"], overwrite=True)
    assert fs.listdir("") == ["_SUCCESS", "part-2"]
    failed = OutputDir(str(tmp_path / "new"))
    failed.prepare()
    failed.fs().write_bytes(failed.task_path("part-9"), b"x")
    failed.abort()
    assert not os.path.exists(tmp_path / "new")


# -- TSV parsing --------------------------------------------------------------------------
def test_tsv_parser_finds_every_kind_of_bad_line():
    spec = import_tsv.parse_spec({"importtsv.columns": "HBASE_ROW_KEY,cf:a,HBASE_TS_KEY,cf:b",
                                  "importtsv.separator": ","})
    data = b"k1,x,5,y\r\nk2,x\n,a,1,b\nk3,a,zz,c\nk4,a,7,c,extra\nk5,v,9,\nk6,w,10\n"
    parsed = import_tsv.parse_tsv(data, spec, "in.csv", first_line=10)
    assert parsed.lines == 7
    assert parsed.rows.to_pydict() == {
        "key": [b"k1", b"k5", b"k6"],
        "cf:a": [b"x", b"v", b"w"], "cf:a@ts": [5, 9, 10],
        "cf:b": [b"y", b"", None], "cf:b@ts": [5, 9, 10],
    }
    assert [(b.line, b.reason) for b in parsed.bad] == [
        (11, "No timestamp"), (12, "Empty row key"), (13, "Invalid timestamp"), (14, "Excessive columns")]
    assert str(parsed.bad[0]) == "in.csv:11: No timestamp: k2,x"
    strict = import_tsv.parse_spec({"importtsv.columns": "HBASE_ROW_KEY,cf:a", "importtsv.skip.bad.lines": "false"})
    with pytest.raises(Exception, match="in.tsv:2: Excessive columns"):
        import_tsv.parse_tsv(b"a\tb\na\tb\tc\n", strict, "in.tsv")
    empty = import_tsv.parse_spec({"importtsv.columns": "HBASE_ROW_KEY,cf:a", "importtsv.skip.empty.columns": "yes"})
    assert import_tsv.parse_tsv(b"a\t\n", empty).rows.column("cf:a").to_pylist() == [None]


def test_tsv_spec_rejects_what_importtsv_rejects():
    cases = {
        "HBASE_ROW_KEY,HBASE_ROW_KEY,cf:a": "twice",
        "HBASE_ROW_KEY,,cf:a": "empty entry",
        "HBASE_ROW_KEY,HBASE_CELL_TTL,cf:a": "not supported",
        "HBASE_ROW_KEY": "no family:qualifier",
        "HBASE_ROW_KEY,bad fam:q": "entry",
    }
    for columns, message in cases.items():
        with pytest.raises(InvalidArgument, match=message):
            import_tsv.parse_spec({"importtsv.columns": columns})
    with pytest.raises(InvalidArgument, match="importtsv.bulk.output"):
        import_tsv.parse_spec({"importtsv.columns": "HBASE_ROW_KEY,cf:a", "importtsv.bulk.output": "/x"})
    spec = import_tsv.parse_spec({"importtsv.columns": "HBASE_ROW_KEY,cf,d:x", "importtsv.separator": "\\t"})
    assert spec.separator == b"\t" and spec.families == ["cf", "d"] and spec.cell_columns == [(1, "cf:"), (2, "d:x")]


def test_import_reads_export_metadata(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / export.METADATA).write_text(json.dumps({"format": "csv", "mode": "cells"}))
    assert import_.read_metadata([str(folder)])["format"] == "csv"
    assert import_.read_metadata([str(tmp_path)]) is None
