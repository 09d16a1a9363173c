"""The scalar column types, each declared once with everything the layers need of it.

A :class:`TypeSpec` says, for one scalar type (``int``, ``date``, a type a
user adds ...):

* how it is spelled: its name, the aliases type strings may use, and whether
  it takes parameters (``varchar(n)``, ``decimal(p,s)``);
* its Arrow type and its Spark DDL spelling;
* its codecs: HBase ``Bytes`` (plain and order-preserving), text, Avro
  (schema, the Avro types read as it, value converters) and JSON (value
  converters);
* how its stored bytes order, per storage form (``binary``, ``ordered``,
  ``string``): ``bytes`` (byte order is value order), ``ordered`` (the same,
  fixed width, negatives included), ``signed`` (big-endian two's
  complement: ordered within one sign) or None (no exact order), which is
  what row-key ranges may promise;
* its pushdown facts: the Python classes a filter literal may have, an extra
  check on a literal, a sample value, and how a literal written as text reads.

Every module that used to keep a table or an if-chain on type names asks
:func:`type_spec` instead, so adding a type is one :func:`register_type`
call.  The built-in types are declared in :mod:`serde.builtin_types`, loaded
on the first lookup (the codec modules they name import :mod:`serde.types`,
which reads this registry, so they cannot be imported here up front).
Array, map and struct are constructors over these types, not entries.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Protocol

import pyarrow as pa

from serde.errors import MappingError

__all__ = ["ColumnType", "ValueCodec", "TypeSpec", "register_type", "type_spec", "find_type", "registered_types", "unregister_type", "COMPLEX_NAMES", "ORDER_KINDS"]


class ColumnType(Protocol):
    """A column type as the registry's callables take it: a :class:`serde.types.DataType`
    (:mod:`serde.types` reads this registry, so the registry names it through this protocol)."""

    name: str
    precision: int | None
    scale: int | None


class ValueCodec(Protocol):
    """A value codec as the registry's factories make it: a :class:`serde.codecs.base.Codec`."""

    def decode(self, raw: bytes) -> Any:
        """One stored value as Python."""
        ...

    def encode(self, value: Any) -> bytes:
        """One Python value as stored bytes."""
        ...


COMPLEX_NAMES = ("array", "map", "struct")
"""The type constructors; every other type name is a registered scalar type."""

ORDER_KINDS = ("bytes", "ordered", "signed")
"""How stored bytes may order (see the module docstring)."""

_PARAMS = (None, "length", "precision_scale")
_FORMS = ("binary", "ordered", "string")

BinaryFactory = Callable[["ColumnType", bool, str], "ValueCodec"]
"""``(data_type, ordered, timestamp_unit) -> Codec`` for the HBase ``Bytes`` forms."""


@dataclass(frozen=True)
class TypeSpec:
    """Everything the SerDe layer and the connector know of one scalar type.

    ``arrow`` and ``ddl`` may be callables of the :class:`~serde.types.DataType`
    (for parameterised types); ``ddl_ntz`` and ``spark_arrow`` differ from
    ``ddl`` / ``arrow`` only for a type whose Spark form depends on the
    timestamp mode.  ``binary(t, ordered, unit)`` and ``text(t, options)``
    build codecs (None: no such form).  ``avro_schema`` is the Avro schema
    (or a callable of the type), ``avro_names`` the Avro primitive names and
    ``"type:logicalType"`` pairs that read as this type, ``avro_read``/``avro_write`` and
    ``json_read``/``json_write`` build value converters from the type (an
    Avro converter may be None: nothing to convert).  ``order`` maps a
    storage form to an order kind.  ``literal_types`` are the classes a
    pushed-down literal may have, ``literal_check`` refuses some of them,
    ``literal_normalize`` brings one to the form of the stored values,
    ``literal_same_class`` asks the stored value to come back as the
    literal's own class, ``sample`` is a plain value, and ``from_text``
    reads a literal written on a command line.
    """

    name: str
    arrow: "pa.DataType | Callable[[ColumnType], pa.DataType]"
    ddl: "str | Callable[[ColumnType], str]"
    aliases: tuple[str, ...] = ()
    params: str | None = None
    value_range: tuple[int, int] | None = None
    ddl_ntz: str | None = None
    spark_arrow: pa.DataType | None = None
    binary: BinaryFactory | None = None
    text: "Callable[[ColumnType, Any], ValueCodec] | None" = None
    avro_schema: Any = None
    avro_names: tuple[str, ...] = ()
    avro_read: "Callable[[ColumnType], Callable[[Any], Any] | None] | None" = None
    avro_write: "Callable[[ColumnType], Callable[[Any], Any] | None] | None" = None
    json_read: "Callable[[ColumnType], Callable[[Any], Any]] | None" = None
    json_write: "Callable[[ColumnType], Callable[[Any], Any]] | None" = None
    order: Mapping[str, str | None] = field(default_factory=lambda: MappingProxyType({}))
    literal_types: tuple[type, ...] = ()
    literal_check: Callable[[Any], bool] | None = None
    literal_normalize: Callable[[Any], Any] | None = None
    literal_same_class: bool = True
    sample: Any = None
    from_text: Callable[[str], Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier() or self.name != self.name.lower():
            raise MappingError("a type name must be a lower-case identifier", self.name)
        if self.name in COMPLEX_NAMES:
            raise MappingError("array, map and struct are type constructors, not registrable types", self.name)
        if self.params not in _PARAMS:
            raise MappingError(f"type params must be one of {_PARAMS}", self.params)
        for form, kind in self.order.items():
            if form not in _FORMS or (kind is not None and kind not in ORDER_KINDS):
                raise MappingError(f"type {self.name!r}: order maps {_FORMS} to {ORDER_KINDS} or None", f"{form}={kind}")
        object.__setattr__(self, "order", MappingProxyType(dict(self.order)))

    def arrow_of(self, data_type: "ColumnType") -> pa.DataType:
        """The Arrow type of values of ``data_type``."""
        return self.arrow(data_type) if callable(self.arrow) else self.arrow

    def ddl_of(self, data_type: "ColumnType", timestamp_ntz: bool = False) -> str:
        """The Spark DDL spelling of ``data_type``."""
        if timestamp_ntz and self.ddl_ntz is not None:
            return self.ddl_ntz
        return self.ddl(data_type) if callable(self.ddl) else self.ddl

    def spark_arrow_of(self, data_type: "ColumnType", timestamp_ntz: bool = False) -> pa.DataType:
        """The Arrow type Spark expects for ``data_type`` (differs for zoned timestamps)."""
        if self.spark_arrow is not None and not timestamp_ntz:
            return self.spark_arrow
        return self.arrow_of(data_type)

    def avro_schema_of(self, data_type: "ColumnType") -> Any:
        """The Avro schema of ``data_type``; raises when the type has no Avro form."""
        if self.avro_schema is None:
            raise MappingError("the type has no Avro form", str(data_type))
        return self.avro_schema(data_type) if callable(self.avro_schema) else self.avro_schema

    def order_of(self, form: str) -> str | None:
        """The order kind of the stored bytes in ``form`` (``binary``, ``ordered``, ``string``)."""
        return self.order.get(form)

    def accepts_literal(self, value: Any) -> bool:
        """Whether a pushed-down literal has a class this type compares with."""
        if value is None or isinstance(value, bool) or not isinstance(value, self.literal_types):
            return False
        return self.literal_check is None or self.literal_check(value)

    def normalize_literal(self, value: Any) -> Any:
        """A literal in the form the stored values have (e.g. an aware timestamp as naive UTC)."""
        return value if self.literal_normalize is None or value is None else self.literal_normalize(value)


_lock = threading.RLock()
_specs: dict[str, TypeSpec] = {}
_aliases: dict[str, str] = {}
_loaded = False
_BUILTINS = "serde.builtin_types"


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    with _lock:
        if not _loaded:
            _loaded = True  # before the import: the module registers through register_type
            try:
                importlib.import_module(_BUILTINS)
            except BaseException:
                _loaded = False
                raise


def register_type(spec: TypeSpec, replace: bool = False) -> TypeSpec:
    """Declare a scalar type; its name and aliases become usable in every mapping form.

    A name or alias already taken raises MappingError unless ``replace``.
    """
    if not isinstance(spec, TypeSpec):
        raise MappingError("register_type takes a TypeSpec", type(spec).__name__)
    _load_builtins()  # a no-op while the built-ins themselves register
    with _lock:
        for word in (spec.name, *spec.aliases):
            key = word.lower()
            taken = _aliases.get(key)
            if taken is not None and taken != spec.name and not replace:
                raise MappingError(f"type name {word!r} is already registered (for {taken!r})", word)
            if key in COMPLEX_NAMES:
                raise MappingError("array, map and struct are type constructors", word)
        if spec.name in _specs and not replace:
            raise MappingError(f"type {spec.name!r} is already registered (pass replace=True)", spec.name)
        _specs[spec.name] = spec
        for word in (spec.name, *spec.aliases):
            _aliases[word.lower()] = spec.name
    return spec


def unregister_type(name: str) -> None:
    """Remove a registered type and its aliases (for types added at run time, e.g. by a test)."""
    with _lock:
        spec = _specs.pop(name, None)
        if spec is None:
            raise MappingError("no such registered type", name)
        for word in (spec.name, *spec.aliases):
            if _aliases.get(word.lower()) == name:
                del _aliases[word.lower()]


def find_type(word: str) -> TypeSpec | None:
    """The type a (case-insensitive) name or alias stands for, or None."""
    _load_builtins()
    name = _aliases.get(word.lower())
    return None if name is None else _specs[name]


def type_spec(name: str) -> TypeSpec:
    """The spec of the registered type ``name`` (its canonical name)."""
    _load_builtins()
    spec = _specs.get(name)
    if spec is None:
        raise MappingError("unknown type", name)
    return spec


def registered_types() -> list[str]:
    """Canonical names of every registered scalar type, in registration order."""
    _load_builtins()
    return list(_specs)
