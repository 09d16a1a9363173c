"""One regular expression, two engines that agree.

The batch path matches with Arrow's RE2 (``match_substring_regex``, which
treats binary data and the pattern as Latin-1, one character per byte); the
cell path matches with Python's :mod:`re` on bytes, because calling Arrow
once per row costs ~15x more.  A pattern is accepted only when both engines
compile it, and the Python copy is rewritten where the two read the same
text differently, so both paths give the same answer:

* ``$`` (outside a class, without the ``m`` flag) becomes ``\\Z``: Python's
  ``$`` also matches before a final newline, RE2's does not.
* ``\\s`` / ``\\S`` become explicit sets: Python's includes ``\\v``, RE2's not.
* POSIX classes ``[[:alpha:]]`` (RE2 only) become explicit ranges.
* ``{,n}`` is a literal in RE2 but a repetition in Python; it is escaped.
* ``\\B`` also matches in an empty value, as RE2's does.

Both engines search (a match anywhere in the value, like Java's
``Matcher.find``) with ``.`` matching newlines (HBase's default ``DOTALL``).
Case-insensitive matching folds ASCII letters only in both.
"""

from __future__ import annotations

import re
import warnings

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidArgument

__all__ = ["compile_regex", "re2_pattern"]

_BS = ord("\\")
_WHITESPACE = rb"\t\n\f\r "
_POSIX = {
    b"alnum": rb"0-9A-Za-z",
    b"alpha": rb"A-Za-z",
    b"ascii": rb"\x00-\x7f",
    b"blank": rb"\t ",
    b"cntrl": rb"\x00-\x1f\x7f",
    b"digit": rb"0-9",
    b"graph": rb"!-~",
    b"lower": rb"a-z",
    b"print": rb" -~",
    b"punct": rb"!-/:-@\[-`{-~",
    b"space": rb"\t\n\x0b\f\r ",
    b"upper": rb"A-Z",
    b"word": rb"0-9A-Za-z_",
    b"xdigit": rb"0-9A-Fa-f",
}


def re2_pattern(pattern: bytes) -> bytes:
    """The pattern as given to Arrow: DOTALL, as HBase's default flags."""
    return b"(?s)" + pattern


def compile_regex(pattern: bytes) -> re.Pattern:
    """Check ``pattern`` with both engines; return the Python engine's copy.

    Raises InvalidArgument naming the pattern and the engine that refused it.
    """
    try:
        pc.match_substring_regex(pa.array([b""], pa.binary()), re2_pattern(pattern))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidArgument(f"regex {pattern!r} is not valid RE2 syntax: {exc}") from None
    translated = _python_pattern(pattern)
    try:
        with warnings.catch_warnings():
            # "possible nested set" style warnings are about future Python
            # versions; the set is escaped or expanded already.
            warnings.simplefilter("ignore", FutureWarning)
            return re.compile(translated, re.DOTALL)
    except re.error as exc:
        raise InvalidArgument(
            f"regex {pattern!r} uses syntax Python's re does not share with RE2: {exc}"
        ) from None


def _python_pattern(p: bytes) -> bytes:
    """Rewrite ``p`` so Python's re reads it as RE2 does (see module doc)."""
    out = bytearray()
    n = len(p)
    i = 0
    multiline = False
    saved: list[bool] = []  # multiline state of each enclosing group
    while i < n:
        c = p[i]
        if c == _BS:
            esc = p[i + 1 : i + 2]
            if esc == b"s":
                out += b"[" + _WHITESPACE + b"]"
            elif esc == b"S":
                out += b"[^" + _WHITESPACE + b"]"
            elif esc == b"B":
                out += rb"(?:\B|\A\Z)"  # Python's \B never matches in an empty value
            else:
                out += p[i : i + 2]
            i += 2
        elif c == ord("["):
            i = _copy_class(p, i, out)
        elif c == ord("("):
            saved.append(multiline)
            if p[i + 1 : i + 2] == b"?":
                j = i + 2
                while j < n and (p[j : j + 1].isalpha() or p[j] == ord("-")):
                    j += 1
                flags = p[i + 2 : j]
                if flags and j < n and p[j] in b":)":
                    on, _, off = flags.partition(b"-")
                    if b"m" in on:
                        multiline = True
                    if b"m" in off:
                        multiline = False
                    if p[j] == ord(")"):  # (?m) sets the flag for the enclosing group
                        saved.pop()
            out.append(c)
            i += 1
        elif c == ord(")"):
            if saved:
                multiline = saved.pop()
            out.append(c)
            i += 1
        elif c == ord("$") and not multiline:
            out += rb"\Z"
            i += 1
        elif c == ord("{") and p[i + 1 : i + 2] == b",":
            out += rb"\{"
            i += 1
        else:
            out.append(c)
            i += 1
    return bytes(out)


def _copy_class(p: bytes, i: int, out: bytearray) -> int:
    """Copy the character class starting at ``p[i] == '['``; return the index after it."""
    n = len(p)
    out.append(p[i])
    i += 1
    if p[i : i + 1] == b"^":
        out.append(p[i])
        i += 1
    if p[i : i + 1] == b"]":  # a leading ']' is a literal in both engines
        out += rb"\]"
        i += 1
    while i < n:
        c = p[i]
        if c == ord("]"):
            out.append(c)
            return i + 1
        if c == _BS:
            esc = p[i + 1 : i + 2]
            if esc == b"s":
                out += _WHITESPACE
            elif esc == b"S":
                raise InvalidArgument(f"regex {p!r}: \\S inside a character class is not supported")
            else:
                out += p[i : i + 2]
            i += 2
        elif c == ord("[") and p[i + 1 : i + 2] == b":":
            end = p.find(b":]", i + 2)
            name = p[i + 2 : end] if end >= 0 else b""
            if name.startswith(b"^"):
                raise InvalidArgument(f"regex {p!r}: negated POSIX classes like [:^{name[1:].decode()}:] are not supported")
            if name not in _POSIX:
                raise InvalidArgument(f"regex {p!r}: unknown POSIX class [:{name.decode('latin-1')}:]")
            out += _POSIX[name]
            i = end + 2
        elif c in b"[&~|":  # literals in RE2; escaped so Python does not read set operations
            out += b"\\" + bytes([c])
            i += 1
        else:
            out.append(c)
            i += 1
    out += p[i:]
    return n
