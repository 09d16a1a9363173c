"""profile-serde: where does a scan through a SerDe spend its time?

    regionscan profile-serde --root R TABLE --mapping MAPPING [--serde NAME] [--rows N]
                             [--paths row,naive,batch] [--predicate "n >= 5"]
                             [--speedscope PATH] [--chart PATH.html|PATH.png] [--json PATH]
    spark-submit jobs/profile_serde.py --root R TABLE --mapping ...

Runs :func:`serde.profile_serde` on a real scan of the table, in this
process: a profile measures what one process spends per row, so it is not
spread over Spark tasks (under spark-submit it runs in the driver).  It
prints the ranked hotspot table (stages and columns with their share of
each path's time); ``--speedscope`` writes a flame graph for
https://www.speedscope.app, ``--chart`` bar charts as PNG, SVG or an HTML
page (with matplotlib, the ``charts`` extra), ``--json`` every figure.
"""

if __name__ == "__main__":  # spark-submit jobs/profile_serde.py: make the repository importable
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _sys.path.insert(0, _os.path.dirname(_here))

import argparse
import json
import re
import sys
from typing import Any, Sequence

import storage
from serde import ProfileReport, profile_serde
from serde.charts import CHART_SUFFIXES, require_matplotlib
from serde.profiler import PATHS
from serde.type_registry import find_type
from storage import InvalidArgument
from storage.engine import nearest_name

from jobs._args import add_root_argument, guarded, parse_defines, script_main
from jobs._mapping import mapping_text, serde_of, source_config
from jobs._writable import check_writable_file

__all__ = ["add_arguments", "run", "main", "parse_predicate", "write_outputs"]

# the operator is every operator character in a row, so 'a >> 5' is a bad operator, not '>' and '> 5'
_PREDICATE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*([=!<>]+)\s*(.+?)\s*$")
_OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "=")
_SPELLINGS = {"<>": "!=", "=>": ">=", "=<": "<="}  # other languages' spellings of ours


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The profile's arguments."""
    parser.add_argument("table", metavar="TABLE", help="table to scan")
    add_root_argument(parser)
    parser.add_argument("--mapping", required=True,
                        help="column mapping (Hive, hbase-spark or JSON catalog; @FILE reads it)")
    parser.add_argument("--serde", default=None, help="SerDe name or dotted path (default as the Spark source chooses)")
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="KEY=VALUE",
                        help="a SerDe property (repeatable)")
    parser.add_argument("--rows", type=int, default=100_000, help="rows per path (default 100000; 0 = all)")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"paths to profile (default {','.join(PATHS)})")
    parser.add_argument("--predicate", default=None, metavar="'COLUMN OP VALUE'",
                        help="a filter applied on each path, e.g. 'n >= 5' (ops: == != < <= > >=)")
    parser.add_argument("--batch-size", type=int, default=8192, help="rows per scan batch (default 8192)")
    parser.add_argument("--top", type=int, default=15, help="hotspots shown per path (default 15)")
    parser.add_argument("--speedscope", default=None, metavar="PATH", help="write a speedscope flame graph (JSON)")
    parser.add_argument("--chart", default=None, metavar="PATH",
                        help="write a chart: .png, .svg or .html (needs matplotlib)")
    parser.add_argument("--json", default=None, metavar="PATH", help="write every figure as JSON")


def _literal(text: str, type_name: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    spec = find_type(type_name)
    if spec is None or spec.from_text is None:
        return text
    try:
        return spec.from_text(text)
    except (ValueError, ArithmeticError):
        raise InvalidArgument(f"--predicate: {text!r} is not a value of type {type_name}") from None


def parse_predicate(text: str | None, column_types: dict[str, str]) -> tuple[str, str, Any] | None:
    """``"n >= 5"`` -> ``("n", ">=", 5)``, the value typed by the column's type."""
    if text is None:
        return None
    match = _PREDICATE.match(text)
    if not match:
        raise InvalidArgument(f"--predicate must be 'COLUMN OP VALUE' (ops == != < <= > >=), got {text!r}")
    column, op, value = match.groups()
    if op not in _OPERATORS:
        hint = _SPELLINGS.get(op) or nearest_name(op, _OPERATORS)
        raise InvalidArgument(f"--predicate: {op!r} is not an operator (ops == != < <= > >=) in {text!r}"
                              + (f"; did you mean {hint!r}?" if hint else ""))
    if column not in column_types:
        raise InvalidArgument(f"--predicate: no column {column!r} in the mapping ({', '.join(column_types)})")
    return column, "==" if op == "=" else op, _literal(value, column_types[column].split("(")[0].split("<")[0])


def _check_output(option: str, path: str | None, suffixes: tuple[str, ...] | None = None) -> None:
    if path is None:
        return
    check_writable_file(path, option)  # before the profile runs: its results must not be lost
    if suffixes and not path.lower().endswith(suffixes):
        raise InvalidArgument(f"{option} must name a {' or '.join(suffixes)} file, got {path!r}")


def write_outputs(report: ProfileReport, speedscope: str | None = None, chart: str | None = None,
                  json_path: str | None = None) -> list[str]:
    """Write the requested files; return what was written, as lines to print."""
    done = []
    if speedscope:
        report.to_speedscope(speedscope)
        done.append(f"speedscope profile written to {speedscope} (open it at https://www.speedscope.app)")
    if chart:
        report.write_chart(chart, "--chart")
        done.append(f"chart written to {chart}")
    if json_path:
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump(report.as_dict(), handle, indent=2, default=str)
        done.append(f"figures written to {json_path}")
    return done


@guarded("profile-serde")
def run(args: argparse.Namespace) -> int:
    """Profile and print the hotspot table."""
    if args.rows < 0:
        raise InvalidArgument(f"--rows must be 0 (all) or more, got {args.rows}")
    if args.batch_size < 1:
        raise InvalidArgument(f"--batch-size must be positive, got {args.batch_size}")
    if args.top < 1:
        raise InvalidArgument(f"--top must be positive, got {args.top}")
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    bad = [p for p in paths if p not in PATHS]
    if bad or not paths:
        raise InvalidArgument(f"--paths must name some of {', '.join(PATHS)}, got {args.paths!r}")
    _check_output("--speedscope", args.speedscope)
    _check_output("--chart", args.chart, CHART_SUFFIXES)
    if args.chart is not None:
        require_matplotlib("--chart")  # before the profile runs, not after it
    _check_output("--json", args.json)
    properties = parse_defines(args.defines)
    config = source_config(args.root, args.table, mapping_text(args.mapping), args.serde, properties)
    serde = serde_of(config)
    types = {name: str(serde.column_type(name)).lower() for name in serde.column_names}
    predicate = parse_predicate(args.predicate, types)
    conn = storage.connect(args.root, read_only=True)
    try:
        report = profile_serde(conn.table(args.table), config.mapping_text, serde=config.serde_name,
                               rows=args.rows or None, properties=properties, paths=paths,
                               predicate=predicate, batch_size=args.batch_size)
    finally:
        conn.close()
    if not any(p.rows for p in report.paths.values()):
        # an empty profile says nothing: say why instead of printing a table of zeros
        raise InvalidArgument(f"table {args.table} has no rows to profile")
    print(report.render_text(top=args.top))
    for line in write_outputs(report, args.speedscope, args.chart, args.json):
        print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit jobs/profile_serde.py ...``"""
    return script_main(sys.modules[__name__], "profile-serde", argv)


if __name__ == "__main__":
    from jobs.profile_serde import main as _main

    sys.exit(_main())
