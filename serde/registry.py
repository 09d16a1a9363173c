"""SerDes by name: built-ins, registered classes, entry points and dotted paths.

A name resolves, in order, to:

1. a class given to :func:`register_serde` (or a built-in: ``binary``,
   ``string``, ``avro``, ``json``, imported on first use);
2. an entry point of the group ``regionscan.serdes`` with that name
   (a third-party package declares
   ``[project.entry-points."regionscan.serdes"] mine = "pkg.mod:MySerDe"``);
3. a dotted path ``"package.module:Class"`` (or ``"package.module.Class"``).

The class must subclass :class:`serde.base.SerDe`.  An unknown name raises
InvalidArgument listing the known names; a known SerDe whose optional
dependency is missing raises an error naming the dependency.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any, Mapping

from serde.base import SerDe
from storage.errors import InvalidArgument

__all__ = ["ENTRY_POINT_GROUP", "register_serde", "get_serde_class", "create_serde", "available_serdes"]

ENTRY_POINT_GROUP = "regionscan.serdes"

_BUILTIN = {
    "binary": "serde.binary_serde:BinarySerDe",
    "string": "serde.string_serde:StringSerDe",
    "avro": "serde.avro_serde:AvroSerDe",
    "json": "serde.json_serde:JsonSerDe",
}

# Extras a built-in needs beyond the core dependencies, for a helpful error.
_NEEDS = {"avro": "fastavro"}

_registered: dict[str, "type[SerDe] | str"] = dict(_BUILTIN)


def register_serde(name: str, serde: "type[SerDe] | str", replace: bool = False) -> None:
    """Register a SerDe class (or its ``"module:Class"`` path) under ``name``."""
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"a SerDe name must be a non-empty string, got {name!r}")
    if name in _registered and not replace:
        raise InvalidArgument(f"a SerDe named {name!r} is already registered (pass replace=True)")
    if not isinstance(serde, str):
        _check_class(name, serde)
    _registered[name] = serde


def _check_class(name: str, cls: Any) -> "type[SerDe]":
    if not (isinstance(cls, type) and issubclass(cls, SerDe)):
        raise InvalidArgument(f"SerDe {name!r} resolves to {cls!r}, which is not a subclass of serde.base.SerDe")
    return cls


def _import_path(path: str, name: str) -> "type[SerDe]":
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise InvalidArgument(f"SerDe path {path!r} must look like 'package.module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = _NEEDS.get(name)
        if missing and exc.name == missing:
            raise InvalidArgument(f"the {name!r} SerDe needs the optional package {missing!r} (pip install {missing})") from exc
        raise InvalidArgument(f"cannot import module {module_name!r} for SerDe {name!r}: {exc}") from exc
    try:
        cls = getattr(module, attr)
    except AttributeError:
        raise InvalidArgument(f"module {module_name!r} has no attribute {attr!r} (SerDe {name!r})") from None
    return _check_class(name, cls)


def _entry_point(name: str) -> "type[SerDe] | None":
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            try:
                cls = ep.load()
            except ImportError as exc:
                raise InvalidArgument(f"entry point {ep.value!r} of SerDe {name!r} does not import: {exc}") from exc
            return _check_class(name, cls)
    return None


def get_serde_class(name: str) -> "type[SerDe]":
    """Resolve ``name`` to a SerDe class (registry, entry point, then dotted path)."""
    if isinstance(name, type):
        return _check_class(name.__name__, name)
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"a SerDe name must be a non-empty string, got {name!r}")
    found = _registered.get(name)
    if found is not None:
        if isinstance(found, str):
            found = _import_path(found, name)
            _registered[name] = found
        return found
    cls = _entry_point(name)
    if cls is not None:
        return cls
    if ":" in name or "." in name:
        return _import_path(name, name)
    raise InvalidArgument(
        f"unknown SerDe {name!r}; known: {available_serdes()} "
        f"(or an entry point in {ENTRY_POINT_GROUP!r}, or 'package.module:Class')"
    )


def create_serde(name: "str | type[SerDe]", mapping: Any = None, properties: Mapping[str, Any] | None = None) -> SerDe:
    """Build the SerDe ``name`` for ``mapping`` (any mapping form) and ``properties``."""
    return get_serde_class(name)(mapping, properties)


def available_serdes() -> list[str]:
    """Registered names plus the names of installed entry points."""
    names = set(_registered)
    names.update(ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


# A column's ``serde`` option (hbase-spark's per-column ``serdes``) is resolved by name here.
SerDe.serde_class_resolver = staticmethod(get_serde_class)
