"""Version 3's narrow chunk encodings: KEYS_FIXED key chunks, DICT and LENGTHS value chunks.

* the writer picks each encoding where it stores smaller, and the base one
  (FIXED, IPC, KEYS) where it does not;
* whatever it picks reads back equal, on the scan, column and point paths,
  with ``check()`` passing and bytewise bounds for values of one width
  (hypothesis over cardinality, widths, absent rows and codecs);
* a chunk whose dictionary codes, dictionary offsets or lengths do not add up
  (written behind valid checksums, a writer's fault) is a CorruptionError
  naming the file on every read of it, never data.
"""

from __future__ import annotations

import random
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import storage.storefile._block_v3 as block_v3
from storage.errors import CorruptionError
from storage.storefile import StoreFileReader, StoreFileWriter
from storage.storefile._chunk_encodings import decode_dict, decode_lengths, encode_dict, encode_lengths
from storage.storefile.codecs import BlockCodec, get_codec
from storage.storefile.format import ChunkEncoding
from storage.vfs.fs import FileSystem

MODES = [b"AIR", b"MAIL", b"SHIP", b"TRUCK", b"RAIL", b"FOB", b"REG AIR"]


def _write(fs, name: str, rows: list, columns: dict, compression="zstd", row_group_size=None) -> None:
    w = StoreFileWriter(fs, name, family=b"cf", compression=compression, row_group_size=row_group_size)
    quals = sorted(columns)
    w.append_rows(pa.array(rows, pa.binary()), quals, [pa.array(columns[q], pa.binary()) for q in quals],
                  [pa.array([None if v is None else 7 for v in columns[q]], pa.int64()) for q in quals])
    w.finish()


def _encodings(r: StoreFileReader) -> list[list[int]]:
    ch = r._index.chunks
    return [ch.encoding[ch.starts[i] : ch.starts[i + 1]] for i in range(r.block_count)]


def _columns(r: StoreFileReader) -> dict:
    """Every qualifier's values by row, read one column at a time."""
    out: dict = {}
    for part in r.scan_parts():
        d = part.dense
        for j, q in enumerate(d.qualifiers):
            out.setdefault(q, {}).update(zip(d.rows.to_pylist(), d.value(j).to_pylist()))
    return out


def _scramble(n: int) -> list[int]:
    return [(i * 2654435761 >> 7) % 10007 for i in range(n)]


@pytest.mark.parametrize("compression", ["zstd", None])
def test_the_writer_picks_each_encoding_where_it_stores_smaller(tmp_path, compression):
    fs = FileSystem(str(tmp_path))
    n = 4000
    mix = _scramble(n)
    columns = {
        b"big": [random.Random(i).randbytes(3000 + i % 5) for i in range(n)],  # lengths save too little: IPC
        b"dates": [(8000 + m % 2500).to_bytes(8, "big") for m in mix],  # integers of a narrow range: FRAME
        # many distinct of one width, spread over all 64 bits: FIXED
        b"hash": [(m * 0x9E3779B97F4A7C15 % (1 << 64)).to_bytes(8, "big") for m in mix],
        b"flag": [(b"ACCEPTED", b"RETURNED")[m % 2] if m % 9 else None for m in mix],  # 2 of one width, absent: DICT
        b"mode": [MODES[m % len(MODES)] for m in mix],  # few values of mixed widths: DICT
        b"text": [b"note %d" % (m * n + i) for i, m in enumerate(mix)],  # all distinct, mixed widths: LENGTHS
    }
    rows = [b"r%07d" % i for i in range(n)]
    _write(fs, "f.sf", rows, columns, compression, row_group_size=4 << 20)  # a few groups
    with StoreFileReader(fs, "f.sf") as r:
        encodings = _encodings(r)
        # the row keys (an 8-byte counter) delta-coded (KEYS_DELTA), each value chunk as named
        assert r.block_count > 1 and {tuple(e) for e in encodings} == {(
            ChunkEncoding.KEYS_DELTA, ChunkEncoding.IPC, ChunkEncoding.FRAME, ChunkEncoding.DICT, ChunkEncoding.FIXED,
            ChunkEncoding.DICT, ChunkEncoding.LENGTHS)}
        r.check()
        got = _columns(r)
        for q, vals in columns.items():
            assert got[q] == dict(zip(rows, vals)), q
        # a point get reads the row back from every encoding
        assert {c.qualifier: c.value for c in r.row_cells(rows[1234])} == {
            q: v[1234] for q, v in columns.items() if v[1234] is not None}


def test_row_keys_of_mixed_widths_keep_their_offsets(tmp_path):
    fs = FileSystem(str(tmp_path))
    rows = sorted(b"k%d" % i for i in range(500))
    _write(fs, "m.sf", rows, {b"q": [b"%d" % i for i in range(500)]})
    with StoreFileReader(fs, "m.sf") as r:
        assert {e[0] for e in _encodings(r)} == {ChunkEncoding.KEYS}
        assert list(_columns(r)[b"q"]) == rows
        r.check()


def _column(rng: random.Random, n: int, width: int | None, distinct: int, absent: float) -> list:
    """``n`` rows drawn from ``distinct`` values (of ``width`` bytes, or 0 to 12 when None),
    each row absent with probability ``absent``."""
    pool = [rng.randbytes(width if width is not None else rng.randint(0, 12)) for _ in range(distinct)]
    return [None if rng.random() < absent else rng.choice(pool) for _ in range(n)]


_shape = st.tuples(st.one_of(st.none(), st.integers(0, 9)), st.sampled_from([1, 3, 40, 300, 5000]),
                   st.sampled_from([0.0, 0.3]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 600), shapes=st.lists(_shape, min_size=1, max_size=3), seed=st.integers(0, 2**32),
       compression=st.sampled_from(["zstd", None, "lz4"]), group=st.sampled_from([2000, 1 << 20]))
def test_every_encoding_reads_back_equal_with_its_bounds(tmp_path_factory, n, shapes, seed, compression, group):
    """Cardinality, widths (0 included), absent rows, codecs and row-group sizes drawn by
    hypothesis (the values from a seeded generator: hypothesis draws lists of hundreds slowly)."""
    rng = random.Random(seed)
    drawn = [_column(rng, n, *shape) for shape in shapes]
    keep = [i for i in range(n) if any(col[i] is not None for col in drawn)]  # a row has some value
    if not keep:
        return
    columns = {b"c%d" % j: [col[i] for i in keep] for j, col in enumerate(drawn)}
    columns = {q: v for q, v in columns.items() if any(x is not None for x in v)}
    fs = FileSystem(str(tmp_path_factory.mktemp("enc")))
    rows = [b"%08d" % i for i in keep]
    _write(fs, "h.sf", rows, columns, compression, row_group_size=group)
    with StoreFileReader(fs, "h.sf") as r:
        r.check()  # recomputes every recorded bound
        got = _columns(r)
        for q, vals in columns.items():
            assert {k: v for k, v in got[q].items() if v is not None} == {
                k: v for k, v in zip(rows, vals) if v is not None}
            lows, highs = r.chunk_stats(q)
            present = [v for v in vals if v is not None]
            if r.block_count == 1 and len({len(v) for v in present}) == 1 and present[0]:  # one width, not 0
                assert (lows[0], highs[0]) == (min(present), max(present))


def test_narrow_codes_and_lengths_round_trip_at_both_widths():
    many = pa.array([b"%05d" % (i % 300) for i in range(2000)] + [None], pa.binary())  # 2-byte codes
    mixed = pa.array([b"x" * (i % 300) for i in range(900)], pa.binary())  # 2-byte lengths
    for values, encode, decode in ((many, encode_dict, decode_dict), (mixed, encode_lengths, decode_lengths),
                                   (pa.array([b"x" * (i % 5) for i in range(300)]).slice(7, 200), encode_dict,
                                    decode_dict), (mixed.slice(3, 200), encode_lengths, decode_lengths)):
        raw = encode(values)
        assert raw is not None
        assert decode(raw, len(values), "chunk", "p.sf", 0).equals(values)


def _lying(kind: ChunkEncoding, damage):
    """An ENCODERS table whose ``kind`` encoder damages its output (checksums stay valid)."""
    original = dict(block_v3.ENCODERS)[kind]

    def encode(values):
        raw = original(values)
        return None if raw is None else pa.py_buffer(damage(bytearray(raw.to_pybytes())))
    return tuple((k, encode if k == kind else f) for k, f in block_v3.ENCODERS)


def _code_out_of_range(b: bytearray) -> bytearray:
    b[-1] = 0xFF  # the last row's u8 code, past a dictionary of 7 entries
    return b


def _dictionary_offset_off(b: bytearray) -> bytearray:
    b[16 + 4 * 7] += 1  # the last dictionary offset (no validity bitmap: the offsets start at 16)
    return b


def _dictionary_offsets_go_back(b: bytearray) -> bytearray:
    # the second and third offsets swapped: the first and last still add up, the steps do not
    # (read as unsigned differences they were all positive, and the chunk passed its check)
    b[16 + 4: 16 + 8], b[16 + 8: 16 + 12] = b[16 + 8: 16 + 12], b[16 + 4: 16 + 8]
    return b


def _lengths_do_not_add_up(b: bytearray) -> bytearray:
    b[8] += 1  # the first row's u8 length
    return b


@pytest.mark.parametrize("kind,damage,message", [
    (ChunkEncoding.DICT, _code_out_of_range, "code out of range"),
    (ChunkEncoding.DICT, _dictionary_offset_off, "dictionary offsets do not add up"),
    (ChunkEncoding.DICT, _dictionary_offsets_go_back, "dictionary offsets do not add up"),
    (ChunkEncoding.LENGTHS, _lengths_do_not_add_up, "lengths add up to"),
])
def test_a_chunk_that_does_not_add_up_is_named_with_the_file(tmp_path, monkeypatch, kind, damage, message):
    fs = FileSystem(str(tmp_path))
    n = 3000
    mix = _scramble(n)
    column = [MODES[m % len(MODES)] for m in mix] if kind == ChunkEncoding.DICT else [b"note %d" % m for m in mix]
    rows = [b"r%07d" % i for i in range(n)]
    monkeypatch.setattr(block_v3, "ENCODERS", _lying(kind, damage))
    _write(fs, "bad.sf", rows, {b"q": column, b"z": [b"%06d" % i for i in range(n)]})  # z: FIXED, undamaged
    monkeypatch.undo()
    with StoreFileReader(fs, "bad.sf") as r:
        assert _encodings(r)[0][1] == kind
        for read in (lambda: list(r.scan_parts(columns=[b"q"])), r.check, lambda: r.row_cells(rows[5]),
                     lambda: list(r.scan_batches())):
            with pytest.raises(CorruptionError, match=rf"{message}.*bad\.sf at offset"):
                read()
        # the other column and the keys never touch the damaged chunk
        assert len(_columns_of(r, b"z")) == n


def _columns_of(r: StoreFileReader, q: bytes) -> dict:
    out = {}
    for part in r.scan_parts(columns=[q]):
        d = part.dense
        out.update(zip(d.rows.to_pylist(), d.value(d.qualifiers.index(q)).to_pylist()))
    return out


def test_key_runs_mixing_key_widths_and_encodings_count_right(tmp_path):
    """Blocks of 4-byte keys, of 6-byte keys and one holding both (KEYS) in one file: a
    keys-only run groups only blocks of one key form (keys of one width, stored whole or
    delta-coded, or with offsets) and width, and counts every row."""
    fs = FileSystem(str(tmp_path))
    rows = [b"a%03d" % i for i in range(300)] + [b"b%05d" % i for i in range(300)]
    _write(fs, "w.sf", rows, {b"q": [b"%d" % i for i in range(600)]}, row_group_size=1500)
    with StoreFileReader(fs, "w.sf") as r:
        kinds = [e[0] for e in _encodings(r)]
        fixed = [k for k in kinds if k in (ChunkEncoding.KEYS_FIXED, ChunkEncoding.KEYS_DELTA)]
        assert ChunkEncoding.KEYS in kinds and len(fixed) >= 4
        assert r.count_rows() == 600
        assert r.count_rows(b"a150", b"b00100") == 250
        assert list(_columns(r)[b"q"]) == rows
        r.check()


class _CountingCodec(BlockCodec):
    """The zstd codec, counting what it compresses (the writer's candidates)."""

    def __init__(self):
        zstd = get_codec("zstd")
        super().__init__(zstd.name, zstd.code, zstd.arrow_name)
        object.__setattr__(self, "compressed", [])

    def compress(self, body):
        self.compressed.append(body.size)
        return super().compress(body)


@pytest.mark.parametrize("values, want, compressions", [
    # codes far narrower than the values: the dictionary alone is compressed
    ([MODES[i * 7 % 5] * 3 for i in range(4000)], ChunkEncoding.DICT, 1),
    # one-byte values: no dictionary candidate (its codes would be as wide)
    ([b"AFNR"[i * 7 % 4 : i * 7 % 4 + 1] for i in range(4000)], ChunkEncoding.FIXED, 1),
    # two-byte values of few kinds: the codes are half as wide, so both are compressed (and
    # the dictionary does not store 10% smaller)
    ([b"%02d" % (i * 7 % 30) for i in range(4000)], ChunkEncoding.FIXED, 2),
    # mixed widths, all distinct: the base and lengths are compared, no dictionary
    ([b"v%d" % (i * 7919) for i in range(4000)], ChunkEncoding.LENGTHS, 2),
])
def test_the_writer_compresses_only_the_candidates_that_can_win(values, want, compressions):
    """A dictionary a quarter the size of the other candidates is taken without compressing
    them (the writer's CPU on lineitem's low-cardinality columns), and one-byte values get no
    dictionary candidate; otherwise every candidate is compressed and the smallest kept."""
    codec = _CountingCodec()
    raw, enc, present, _lo, _hi, stored = block_v3._encode_values(pa.array(values, pa.binary()), codec)
    assert (enc, len(codec.compressed)) == (want, compressions)
    assert present == len(values)
    # whichever was kept decodes to the values
    body = get_codec("zstd").decompress(stored, raw.size)
    decode = {ChunkEncoding.DICT: decode_dict, ChunkEncoding.LENGTHS: decode_lengths}.get(enc)
    got = decode(body, len(values), "chunk", "f", 0) if decode else block_v3._decode_fixed(body, len(values), "c", "f", 0)
    assert got.to_pylist() == values
