"""Argument conventions shared by the batch jobs, and their stand-alone entry point.

Jobs follow HBase's own tools: ``--starttime`` / ``--endtime`` in
milliseconds, row keys in ``Bytes.toBytesBinary`` form (``row\\x00\\xff``),
Hadoop-style ``-Dkey=value`` settings.  Every job takes ``--root``: a
path, a filesystem URI (``s3://bucket/tables``) or a region server
(``grpc://host:port``).

:func:`script_main` is what ``spark-submit jobs/<job>.py ...`` (or
``python -m jobs.<job>``) runs; :func:`guarded` gives ``run(args)`` the
same clear one-line failures under the ``regionscan`` command.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any, Callable, Sequence

from storage import LATEST_TIMESTAMP, InvalidArgument, StorageError
from storage.engine import nearest_name

__all__ = [
    "DEFAULT_ROOT",
    "add_root_argument",
    "add_time_arguments",
    "parse_defines",
    "parse_row_key",
    "parse_millis",
    "time_range_of",
    "parse_bool",
    "guarded",
    "script_main",
    "JobParser",
]

DEFAULT_ROOT = "./regionscan-data"


class JobParser(argparse.ArgumentParser):
    """The argument parser of ``regionscan`` and of every job run on its own.

    Two things differ from argparse's own parser:

    * a positional list that may be empty (``nargs="*"``, such as row_counter's
      COLUMN) is optional: argparse otherwise names it among the "required"
      arguments when the positionals before it are missing;
    * an unrecognized option is refused by the parser it was given to, the
      subcommand's (its usage, not the top-level one), with the closest option
      it has (``--rooot`` -> ``did you mean --root?``).  A subcommand's parser
      is found through the ``_parser`` default the ``regionscan`` command sets.

    Subparsers made with ``add_subparsers()`` are of this class too.
    """

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        positional = bool(args) and not args[0].startswith(tuple(self.prefix_chars))
        if positional and kwargs.get("nargs") == argparse.ZERO_OR_MORE:
            kwargs.setdefault("default", [])  # with a default, argparse does not require it
        return super().add_argument(*args, **kwargs)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            owner = getattr(parsed, "_parser", None) or self
            owner.error(unrecognized(owner, extras))
        return parsed


def unrecognized(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """argparse's "unrecognized arguments" message, with the closest option of
    ``parser`` after each misspelled one."""
    known = [s for action in parser._actions for s in action.option_strings]
    words = []
    for extra in extras:
        flag = extra.split("=", 1)[0]
        hint = nearest_name(flag, known) if flag.startswith(tuple(parser.prefix_chars)) and len(flag) > 1 else None
        words.append(f"{extra} (did you mean {hint}?)" if hint else extra)
    return "unrecognized arguments: " + " ".join(words)


def add_root_argument(parser: argparse.ArgumentParser) -> None:
    """``--root``: where the tables live."""
    parser.add_argument("--root", default=DEFAULT_ROOT,
                        help="where the tables live: a path, a filesystem URI or grpc://host:port "
                             f"(default {DEFAULT_ROOT})")


def add_time_arguments(parser: argparse.ArgumentParser) -> None:
    """``--starttime`` (inclusive) and ``--endtime`` (exclusive), in ms, as HBase's tools."""
    parser.add_argument("--starttime", default=None, metavar="MS",
                        help="only cells with a timestamp >= MS (milliseconds since the epoch)")
    parser.add_argument("--endtime", default=None, metavar="MS",
                        help="only cells with a timestamp < MS")


def parse_millis(value: Any, option: str) -> int:
    """A non-negative timestamp in milliseconds; the error names ``option``."""
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise InvalidArgument(f"{option} must be a timestamp in milliseconds, got {value!r}") from None
    if number < 0:
        raise InvalidArgument(f"{option} must not be negative, got {value!r}")
    return number


def time_range_of(starttime: Any, endtime: Any) -> tuple[int, int] | None:
    """``[starttime, endtime)`` from the two options (None when neither is given)."""
    if starttime is None and endtime is None:
        return None
    start = parse_millis(starttime, "--starttime") if starttime is not None else 0
    end = parse_millis(endtime, "--endtime") if endtime is not None else LATEST_TIMESTAMP
    if end <= start:
        raise InvalidArgument(f"--endtime ({end}) must be after --starttime ({start})")
    return start, end


def parse_row_key(value: str, option: str) -> bytes:
    """A row key in ``Bytes.toBytesBinary`` form (``\\xNN`` escapes)."""
    from connector.options import to_bytes_binary

    return to_bytes_binary(value, option)


def parse_bool(value: Any, option: str) -> bool:
    """``true/false``, ``yes/no``, ``1/0`` in any case."""
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off"):
        return False
    raise InvalidArgument(f"{option} must be true or false, got {value!r}")


def parse_defines(items: Sequence[str] | None) -> dict[str, str]:
    """``-Dkey=value`` items (argparse gives ``key=value``) -> dict; a missing ``=`` is an error."""
    out: dict[str, str] = {}
    for item in items or ():
        text = str(item)
        if text.startswith("-D"):
            text = text[2:]
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise InvalidArgument(f"-D expects -Dkey=value, got {item!r}")
        out[key.strip()] = value
    return out


def guarded(name: str) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Decorate ``run(args)``: an engine or Spark failure prints one line and returns 1.

    Errors of Spark itself (``pyspark`` / ``py4j`` exceptions) are reduced
    to the line that says what went wrong, and their whole text is written
    to a log file the line names; anything else is a bug and keeps its
    traceback.

    Bad arguments (``ValueError``, ``InvalidArgument``) are left to the
    caller, which prints them and exits with 2 as argparse does.
    """

    def wrap(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @functools.wraps(run)
        def inner(args: argparse.Namespace) -> int:
            try:
                return run(args)
            except ValueError:
                raise
            except StorageError as exc:
                print(f"regionscan {name}: failed: {exc}", file=sys.stderr)
                return 1
            except Exception as exc:
                if not type(exc).__module__.startswith(("pyspark", "py4j")):
                    raise
                # Spark's errors carry a JVM stack trace and a worker's traceback: one line here,
                # the whole text in a log file the line names
                from jobs._failure import spark_error_line, write_failure_log

                log = write_failure_log(name, exc)
                where = f" (full stack in {log})" if log else ""
                print(f"regionscan {name}: failed: {spark_error_line(exc)}{where}", file=sys.stderr)
                return 1

        return inner

    return wrap


def script_main(module: Any, prog: str, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` with the job's ``add_arguments`` and run it, as ``regionscan <job>`` does."""
    doc = (module.__doc__ or "").strip().splitlines()
    parser = JobParser(prog=prog, description=doc[0] if doc else None)
    module.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except ValueError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
