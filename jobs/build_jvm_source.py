"""``regionscan build-jvm-source``: compile the JVM source and print the jar's path.

For clusters: ``spark-submit --jars $(regionscan build-jvm-source) ...``
puts ``format("regionscan")`` (the DataSource V2) on the driver and the
executors.  The jar is cached per user by source hash and pyspark version
(see :mod:`connector.worker.build`); ``--force`` compiles it again.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options."""
    parser.add_argument("--force", action="store_true", help="compile even when a matching jar is cached")


def run(args: argparse.Namespace) -> int:
    """Build (or find) the jar and print its path; 1 with one line where no JDK can build it."""
    from connector.worker import JvmSourceUnavailable, build_jar

    try:
        print(build_jar(force=args.force))
    except JvmSourceUnavailable as exc:
        print(f"regionscan build-jvm-source: {exc}", file=sys.stderr)
        return 1
    return 0
