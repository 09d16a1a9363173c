"""The SerDe registry: built-in names, registered classes, dotted paths and entry points."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from serde import SerDe, available_serdes, create_serde, get_serde_class, register_serde
from serde.binary_serde import BinarySerDe
from serde.registry import ENTRY_POINT_GROUP, _registered
from storage.errors import InvalidArgument

PLUGIN = textwrap.dedent(
    '''
    """A third-party SerDe: text storage, with string values upper-cased on read."""
    from serde.string_serde import StringSerDe
    from serde.codecs.text import StringText


    class Upper(StringText):
        def parse(self, text):
            return text.upper()

        def parse_array(self, strings):
            import pyarrow.compute as pc
            import numpy as np
            return pc.utf8_upper(strings), np.ones(len(strings), dtype=bool)


    class UpperSerDe(StringSerDe):
        name = "upper"

        def value_codec(self, column, data_type, role):
            if data_type.name == "string":
                return Upper(data_type, self.text_options)
            return super().value_codec(column, data_type, role)


    NotASerDe = object
    '''
)


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    """A package on sys.path with an installed-distribution record declaring an entry point."""
    package = tmp_path / "upper_serde_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(PLUGIN)
    dist = tmp_path / "upper_serde_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: upper-serde-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nupper = upper_serde_pkg:UpperSerDe\nbroken = upper_serde_missing:Nope\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    sys.modules.pop("upper_serde_pkg", None)


def test_builtins_by_name():
    for name in ("binary", "string", "avro", "json"):
        cls = get_serde_class(name)
        assert issubclass(cls, SerDe) and cls.name == name
        assert name in available_serdes()
    assert isinstance(create_serde("binary", "k STRING :key, v INT cf:v"), BinarySerDe)


def test_unknown_name_lists_what_is_known():
    with pytest.raises(InvalidArgument) as err:
        get_serde_class("nosuch")
    assert "nosuch" in str(err.value) and "binary" in str(err.value)


def test_dotted_path(plugin_dir):
    sd = create_serde("upper_serde_pkg:UpperSerDe", "k STRING :key, v STRING cf:v")
    assert sd.deserialize((b"a", {b"cf:v": b"abc"})) == ("a", "ABC")
    assert get_serde_class("upper_serde_pkg.UpperSerDe") is get_serde_class("upper_serde_pkg:UpperSerDe")
    with pytest.raises(InvalidArgument) as err:
        get_serde_class("upper_serde_pkg:NotASerDe")
    assert "not a subclass" in str(err.value)
    with pytest.raises(InvalidArgument) as err:
        get_serde_class("upper_serde_pkg:Missing")
    assert "Missing" in str(err.value)
    with pytest.raises(InvalidArgument) as err:
        get_serde_class("no_such_module_xyz:Thing")
    assert "no_such_module_xyz" in str(err.value)


def test_entry_point_plugin(plugin_dir):
    assert "upper" in available_serdes()
    sd = create_serde("upper", "k STRING :key, v STRING cf:v, n INT cf:n")
    from serde import record_batch_rows, rows_to_batch

    rows = [(b"a", {b"cf:v": b"xy", b"cf:n": b"3"})]
    assert sd.deserialize(rows[0]) == ("a", "XY", 3)
    assert record_batch_rows(sd.deserialize_batch(rows_to_batch(rows, sd.scan_columns))) == [("a", "XY", 3)]
    with pytest.raises(InvalidArgument) as err:
        get_serde_class("broken")
    assert "upper_serde_missing" in str(err.value)


def test_register_class_and_replace():
    class Mine(BinarySerDe):
        name = "mine"

    try:
        register_serde("mine", Mine)
        assert get_serde_class("mine") is Mine
        with pytest.raises(InvalidArgument):
            register_serde("mine", Mine)
        register_serde("mine", BinarySerDe, replace=True)
        assert get_serde_class("mine") is BinarySerDe
        with pytest.raises(InvalidArgument):
            register_serde("other", object)
    finally:
        _registered.pop("mine", None)
