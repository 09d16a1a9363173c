"""User filters in the filter language (HBase's ``ParseFilter.registerFilter``).

A user filter is a :class:`~storage.filters.Filter` subclass with a class
method ``from_arguments(arguments)``, HBase's ``createFilterFromArguments``:
it gets the call's arguments as Python values (a quoted string as bytes, an
integer as int, a decimal number as float, ``true``/``false`` as bool, a
compare operator or ``NO_OP`` as :class:`CompareOperator`) and returns the
filter.  Its ``repr`` should print a call the parser reads back, since a
filter crosses the wire (region server, Thrift gateway, Spark tasks) as
text; the receiving process must have registered the same name (``--filter``
of ``regionscan serve`` and ``regionscan thrift``, the connector's
``regionscan.filter.classes`` option).

Registration is per process, as in HBase.  Names are identifiers; a
built-in filter's name or a keyword cannot be taken, and a name taken by
another class must be unregistered first.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Callable, Iterable

from ..errors import InvalidArgument, clip
from .base import Filter

__all__ = ["register_filter", "unregister_filter", "registered_filters", "register_filter_specs", "user_filter"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_KEYWORDS = {"AND", "OR", "SKIP", "WHILE", "TRUE", "FALSE", "NO_OP"}
_USER: dict[str, type[Filter]] = {}
# bumped by every change of _USER: a string parsed before a change may parse otherwise after it,
# so parses kept for reuse are keyed by it (storage.filters.parser.parsed_filter)
_VERSION = [0]


def _builtin_names() -> tuple[str, ...]:
    from ._builders import FILTER_NAMES

    return FILTER_NAMES


def _load(path: str) -> Any:
    """The object a ``package.module:Name`` (or ``package.module.Name``) path names."""
    module, sep, attr = path.partition(":")
    if not sep:
        module, _, attr = path.rpartition(".")
    if not module or not attr:
        raise InvalidArgument(f"filter class {path!r} must be given as package.module:ClassName")
    try:
        found: Any = importlib.import_module(module)
        for part in attr.split("."):
            found = getattr(found, part)
    except ImportError as exc:
        raise InvalidArgument(f"filter class {path!r}: cannot import module {module!r} ({clip(str(exc), 120)})") from None
    except AttributeError:
        raise InvalidArgument(f"filter class {path!r}: module {module!r} has no {attr!r}") from None
    return found


def register_filter(name: str, filter_class: type[Filter] | str) -> None:
    """Let filter strings call ``name (...)`` to build a ``filter_class``.

    ``filter_class`` is the class or its ``package.module:ClassName`` path
    (HBase takes the class name).  Raises InvalidArgument, before anything
    is registered, for a bad name or a class without ``from_arguments``.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidArgument(f"filter name {clip(repr(name), 60)} must be an identifier (letters, digits, _)")
    if name.upper() in _KEYWORDS:
        raise InvalidArgument(f"filter name {name!r} is a keyword of the filter language")
    if name in _builtin_names():
        raise InvalidArgument(f"filter name {name!r} is a built-in filter")
    cls = _load(filter_class) if isinstance(filter_class, str) else filter_class
    if not isinstance(cls, type) or not issubclass(cls, Filter):
        raise InvalidArgument(f"filter {name!r} must be a storage.filters.Filter subclass, got {clip(repr(cls), 80)}")
    if not callable(getattr(cls, "from_arguments", None)):
        raise InvalidArgument(f"filter class {cls.__name__} has no from_arguments(arguments) class method")
    taken = _USER.get(name)
    if taken is not None and taken is not cls:
        raise InvalidArgument(f"filter name {name!r} is already registered for {taken.__module__}.{taken.__qualname__}")
    if taken is None:
        _USER[name] = cls
        _VERSION[0] += 1


def unregister_filter(name: str) -> None:
    """Forget a user filter (no error when ``name`` is not registered)."""
    if _USER.pop(name, None) is not None:
        _VERSION[0] += 1


def registry_version() -> int:
    """A number that changes whenever a user filter is registered or unregistered."""
    return _VERSION[0]


def registered_filters() -> dict[str, type[Filter]]:
    """The user filters, by name."""
    return dict(_USER)


def user_filter(name: str) -> Callable[[list], Filter] | None:
    """The ``from_arguments`` of the user filter ``name``, or None."""
    cls = _USER.get(name)
    return None if cls is None else cls.from_arguments


def register_filter_specs(specs: Iterable[str] | str | None) -> list[str]:
    """Register ``NAME=package.module:ClassName`` entries (a list, or one
    comma-separated string, as command lines and options give them);
    returns the names."""
    if specs is None:
        return []
    items = specs.split(",") if isinstance(specs, str) else list(specs)
    names = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        name, sep, path = item.partition("=")
        if not sep or not path.strip():
            raise InvalidArgument(f"filter class {item!r} must be given as NAME=package.module:ClassName")
        register_filter(name.strip(), path.strip())
        names.append(name.strip())
    return names
