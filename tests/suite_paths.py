"""Where the suite's files are: the repository, the tests folder and the golden files.

Test modules live one folder down (``tests/storage/``, ``tests/connector/`` ...), so they
name these places through here instead of counting ``dirname`` calls from their own file.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
GOLDEN = TESTS / "golden"
