"""Framed documents: round trips, argument checks and every kind of corruption."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.errors import CorruptionError, InvalidArgument
from storage.vfs.fs import FileSystem
from storage.region.framing import (
    FRAME_HEADER_SIZE,
    Document,
    decode_document,
    decode_frame,
    encode_document,
    read_document,
    write_document,
)

KIND = b"TBLMANIF"
PATH = "tables/t/.tablemanifest"

PAYLOAD = {
    "name": "t",
    "families": {"cf": {"max_versions": 3, "ttl": None, "bloom": "row", "ratio": 0.25, "on": True}},
    "regions": [
        {"id": "r0", "start": "", "end": "6d00ff"},
        {"id": "r1", "start": "6d00ff", "end": None},
    ],
    "flushed_seq_id": 2**62 + 1,
    "note": "ünïcode ✓",
    "blob": bytes(range(256)).hex(),
    "empty": {},
    "nested": [["61", [""]], {"k": "80"}],
}


def test_round_trip_keeps_json_values():
    data = encode_document(KIND, 1, PAYLOAD)
    assert data[:8] == KIND
    assert decode_document(data, KIND, PATH) == PAYLOAD
    doc = decode_frame(data, KIND, PATH)
    assert doc == Document(KIND, 1, PAYLOAD)


def test_encoding_is_deterministic_and_follows_the_layout():
    data = encode_document(KIND, 3, {"b": 1, "a": "01"})
    assert data == encode_document(KIND, 3, {"a": "01", "b": 1})
    kind, version, flags, length, crc = struct.unpack_from("<8sHHII", data)
    body = data[FRAME_HEADER_SIZE:]
    assert (kind, version, flags, length) == (KIND, 3, 0, len(body))
    assert crc == zlib.crc32(data[:16] + body)
    assert body == b'{"a":"01","b":1}'  # sorted keys, compact separators


def test_tuples_come_back_as_lists_and_bytes_are_refused():
    data = encode_document(KIND, 1, {"t": (1, 2)})
    assert decode_document(data, KIND, PATH) == {"t": [1, 2]}
    for value in (b"xy", bytearray(b"xy"), memoryview(b"z")):
        with pytest.raises(InvalidArgument, match=r"\$.a.b is .*hex strings"):
            encode_document(KIND, 1, {"a": {"b": value}})


def test_supported_versions_are_the_callers_choice():
    data = encode_document(KIND, 2, {"x": 1})
    assert decode_frame(data, KIND, PATH, supported_versions=(1, 2)).version == 2
    with pytest.raises(CorruptionError, match="version 2") as err:
        decode_document(data, KIND, PATH)
    assert err.value.offset == 8 and err.value.path == PATH


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_round_trip_arbitrary_payloads(payload):
    assert decode_document(encode_document(KIND, 1, payload), KIND, PATH) == payload


# -- arguments ---------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, version, payload, message",
    [
        (b"SHORT", 1, {}, "kind"),
        ("TBLMANIF", 1, {}, "kind"),
        (KIND, 0, {}, "version"),
        (KIND, 1 << 16, {}, "version"),
        (KIND, True, {}, "version"),
        (KIND, 1, [1, 2], "dict"),
        (KIND, 1, {1: "x"}, "keys must be str"),
        (KIND, 1, {"a": float("nan")}, "finite"),
        (KIND, 1, {"a": float("inf")}, "finite"),
        (KIND, 1, {"a": b"\x01"}, "hex strings"),
        (KIND, 1, {"a": {1, 2}}, "set"),
        (KIND, 1, {"a": "\ud800"}, "Unicode"),
    ],
)
def test_encode_rejects_bad_arguments(kind, version, payload, message):
    with pytest.raises(InvalidArgument, match=message):
        encode_document(kind, version, payload)


def test_decode_rejects_a_bad_expected_kind():
    with pytest.raises(InvalidArgument, match="kind"):
        decode_document(encode_document(KIND, 1, {}), b"X", PATH)


# -- corruption --------------------------------------------------------------


def corruption(data: bytes, **kwargs) -> CorruptionError:
    with pytest.raises(CorruptionError) as err:
        decode_document(data, KIND, PATH, **kwargs)
    assert err.value.path == PATH and PATH in str(err.value)
    return err.value


def test_truncation_at_every_length():
    data = encode_document(KIND, 1, PAYLOAD)
    for cut in range(len(data)):
        err = corruption(data[:cut])
        assert "truncated" in str(err) and err.offset == cut


def test_wrong_kind():
    err = corruption(encode_document(b"RGNMANIF", 1, {"x": 1}))
    assert err.offset == 0 and "magic" in str(err)


def test_trailing_bytes_are_a_length_mismatch():
    data = encode_document(KIND, 1, PAYLOAD)
    err = corruption(data + b"\x00")
    assert err.offset == len(data) and "length" in str(err)


def test_flipped_bit_anywhere_is_detected():
    data = encode_document(KIND, 1, PAYLOAD)
    for pos in range(len(data)):
        bad = bytearray(data)
        bad[pos] ^= 0x04
        err = corruption(bytes(bad))
        if pos < 8:
            assert err.offset == 0 and "magic" in str(err)
        elif 12 <= pos < 16:  # the length field no longer matches the data
            assert "truncated" in str(err) or "length" in str(err)
        else:
            assert err.offset == 0 and "checksum" in str(err), pos


def _reframe(body: bytes, version: int = 1, flags: int = 0) -> bytes:
    """Frame raw payload bytes with a valid checksum, bypassing the encoder."""
    head = struct.pack("<8sHHI", KIND, version, flags, len(body))
    return head + struct.pack("<I", zlib.crc32(body, zlib.crc32(head))) + body


def test_checksummed_frame_with_unknown_flags():
    err = corruption(_reframe(b"{}", flags=1))
    assert err.offset == 10 and "flags" in str(err)


@pytest.mark.parametrize(
    "body, message",
    [
        (b"{not json", "JSON"),
        (b"\xff\xfe{}", "JSON"),
        (b"[1, 2]", "object"),
    ],
)
def test_checksummed_frame_with_bad_payload(body, message):
    err = corruption(_reframe(body))
    assert err.offset == FRAME_HEADER_SIZE and message in str(err)


# -- files -------------------------------------------------------------------


def test_write_and_read_document_through_the_filesystem(tmp_path):
    fs = FileSystem(str(tmp_path))
    fs.makedirs("t")
    write_document(fs, "t/manifest", KIND, 1, PAYLOAD)
    assert read_document(fs, "t/manifest", KIND) == Document(KIND, 1, PAYLOAD)
    assert fs.listdir("t") == ["manifest"]  # no temporary file left behind
    data = fs.read_bytes("t/manifest")
    fs.write_bytes("t/manifest", data[:-1])
    with pytest.raises(CorruptionError) as err:
        read_document(fs, "t/manifest", KIND)
    assert err.value.path == fs.uri("t/manifest") and err.value.offset == len(data) - 1
