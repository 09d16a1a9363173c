"""The row bloom filter of a store file, and the registry of filter policies.

A filter answers "might this file hold cells of row R?" so a get skips files
that certainly do not.  Each policy has a name written into the file; if the
hashing or the bit layout ever changes, the new policy gets a new name and
old files keep the policy they were written with (a reader that does not
know a name ignores the filter, which is always safe).

Policy ``rs-row-bloom-v1``: two 64-bit hashes ``h1, h2`` of the row key
(:func:`row_hash_pair`), ``k`` probe positions ``(h1 + i * h2) mod 2**64 mod m``
for ``i`` in ``0..k-1`` (Kirsch-Mitzenmacher double hashing), bit ``p`` is
bit ``p % 8`` (least significant first) of byte ``p // 8``.

Hashes are computed with NumPy over a whole Arrow binary array, eight key
bytes per step, so building the filter has no Python loop per row; the
scalar :func:`row_hash_pair` computes the same values for one key.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pyarrow as pa

from ..errors import CorruptionError

__all__ = [
    "RowBloomFilter",
    "BLOOM_POLICIES",
    "DEFAULT_BITS_PER_KEY",
    "row_hash_pair",
    "row_hash_pairs",
    "decode_bloom",
]

DEFAULT_BITS_PER_KEY = 10  # about 1% false positives with 7 probes

_M64 = (1 << 64) - 1
_SEED = 0x9E3779B97F4A7C15
_C_LEN = 0xC2B2AE3D27D4EB4F
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F
_C3 = 0x52DCE729
_C_SECOND = 0x2545F4914F6CDD1D
_FMIX1 = 0xFF51AFD7ED558CCD
_FMIX2 = 0xC4CEB9FE1A85EC53

# Bytes of padded keys processed per NumPy chunk, to bound temporary memory.
_CHUNK_BYTES = 8 << 20


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * _FMIX1) & _M64
    h ^= h >> 33
    h = (h * _FMIX2) & _M64
    return h ^ (h >> 33)


def row_hash_pair(row: bytes) -> tuple[int, int]:
    """The two 64-bit hashes of one row key (the scalar twin of :func:`row_hash_pairs`)."""
    n = len(row)
    h = _SEED ^ ((n * _C_LEN) & _M64)
    padded = row + b"\0" * (-n % 8)
    for (w,) in struct.iter_unpack("<Q", padded):
        k = (w * _C1) & _M64
        k = ((k << 31) | (k >> 33)) & _M64
        k = (k * _C2) & _M64
        h ^= k
        h = ((h << 27) | (h >> 37)) & _M64
        h = (h * 5 + _C3) & _M64
    h = _fmix(h ^ n)
    return h, _fmix(h ^ _C_SECOND)


def _u(x: int) -> np.uint64:
    return np.uint64(x)


def _fmix_np(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> _u(33))
    h = h * _u(_FMIX1)
    h = h ^ (h >> _u(33))
    h = h * _u(_FMIX2)
    return h ^ (h >> _u(33))


def _hash_chunk(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    n = len(starts)
    nwords = (lengths + 7) // 8
    h = _u(_SEED) ^ (lengths.astype(np.uint64) * _u(_C_LEN))
    width = int(nwords.max()) * 8 if n else 0
    if width:
        # Gather every key into a zero-padded (n, width) byte matrix and read
        # it as little-endian 64-bit words: one NumPy step per word column.
        cols = np.arange(width, dtype=np.int64)
        idx = starts[:, None] + cols[None, :]
        inside = cols[None, :] < lengths[:, None]
        np.minimum(idx, max(len(data) - 1, 0), out=idx)
        padded = np.where(inside, data[idx] if len(data) else 0, 0).astype(np.uint8)
        words = np.ascontiguousarray(padded).view("<u8").reshape(n, width // 8)
        for j in range(width // 8):
            k = words[:, j] * _u(_C1)
            k = (k << _u(31)) | (k >> _u(33))
            k = k * _u(_C2)
            step = h ^ k
            step = (step << _u(27)) | (step >> _u(37))
            step = step * _u(5) + _u(_C3)
            h = np.where(nwords > j, step, h)
    return _fmix_np(h ^ lengths.astype(np.uint64))


def row_hash_pairs(rows: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Hashes ``(h1, h2)`` (uint64 arrays) of every key of a binary array."""
    if pa.types.is_large_binary(rows.type):
        rows = rows.cast(pa.binary())
    n = len(rows)
    if n == 0:
        empty = np.zeros(0, dtype=np.uint64)
        return empty, empty
    bufs = rows.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[rows.offset : rows.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    out = np.empty(n, dtype=np.uint64)
    widest = max(int(lengths.max()), 8)
    step = max(1, _CHUNK_BYTES // widest)
    for lo in range(0, n, step):
        out[lo : lo + step] = _hash_chunk(data, starts[lo : lo + step], lengths[lo : lo + step])
    return out, _fmix_np(out ^ _u(_C_SECOND))


class RowBloomFilter:
    """A bloom filter over row keys (policy ``rs-row-bloom-v1``)."""

    POLICY = "rs-row-bloom-v1"
    _PARAMS = struct.Struct("<IQQ")  # probes, bits, keys

    def __init__(self, num_bits: int, num_hashes: int, num_keys: int, bits: bytes):
        self.num_bits = num_bits
        self.num_hashes = num_hashes
        self.num_keys = num_keys
        self._bits = bytes(bits)

    @classmethod
    def build(cls, h1: np.ndarray, h2: np.ndarray, bits_per_key: int = DEFAULT_BITS_PER_KEY) -> "RowBloomFilter":
        """A filter holding the keys whose hashes are ``h1, h2``."""
        n = len(h1)
        num_bits = max(64, -(-n * bits_per_key // 8) * 8)
        num_hashes = max(1, min(30, round(bits_per_key * math.log(2))))
        bits = np.zeros(num_bits, dtype=bool)
        if n:
            bits[cls._positions(h1, h2, num_bits, num_hashes).ravel()] = True
        return cls(num_bits, num_hashes, n, np.packbits(bits, bitorder="little").tobytes())

    @staticmethod
    def _positions(h1: np.ndarray, h2: np.ndarray, num_bits: int, num_hashes: int) -> np.ndarray:
        probes = np.arange(num_hashes, dtype=np.uint64)
        return (h1[:, None] + probes[None, :] * h2[:, None]) % _u(num_bits)

    def might_contain(self, row: bytes) -> bool:
        """False only if ``row`` is certainly absent."""
        h1, h2 = row_hash_pair(row)
        bits, m = self._bits, self.num_bits
        for i in range(self.num_hashes):
            p = ((h1 + i * h2) & _M64) % m
            if not (bits[p >> 3] >> (p & 7)) & 1:
                return False
        return True

    def might_contain_many(self, rows: pa.Array) -> np.ndarray:
        """A boolean array: False where a row of ``rows`` is certainly absent."""
        h1, h2 = row_hash_pairs(rows)
        pos = self._positions(h1, h2, self.num_bits, self.num_hashes)
        packed = np.frombuffer(self._bits, dtype=np.uint8)
        hit = (packed[pos >> _u(3)] >> (pos & _u(7)).astype(np.uint8)) & 1
        return hit.all(axis=1) if len(pos) else np.zeros(0, dtype=bool)

    def encode(self) -> bytes:
        """The bloom section body: policy name, parameters, bits."""
        name = self.POLICY.encode("ascii")
        return bytes([len(name)]) + name + self._PARAMS.pack(self.num_hashes, self.num_bits, self.num_keys) + self._bits

    @classmethod
    def from_params(cls, params: memoryview, path: str, offset: int) -> "RowBloomFilter":
        """Parse the part of a bloom section body after the policy name."""
        if len(params) < cls._PARAMS.size:
            raise CorruptionError("truncated bloom filter parameters", path, offset)
        probes, num_bits, keys = cls._PARAMS.unpack_from(params, 0)
        bits = params[cls._PARAMS.size :]
        if num_bits == 0 or num_bits % 8 or len(bits) != num_bits // 8 or not 1 <= probes <= 64:
            raise CorruptionError("inconsistent bloom filter parameters", path, offset)
        return cls(num_bits, probes, keys, bits)


BLOOM_POLICIES: dict[str, type[RowBloomFilter]] = {RowBloomFilter.POLICY: RowBloomFilter}
"""Policy name (as written to the file) -> filter class."""


def decode_bloom(body: memoryview, path: str, offset: int) -> RowBloomFilter | None:
    """The filter of a bloom section body, or None when its policy is unknown here."""
    if len(body) < 1 or len(body) < 1 + body[0]:
        raise CorruptionError("truncated bloom filter policy name", path, offset)
    name = bytes(body[1 : 1 + body[0]]).decode("ascii", "replace")
    policy = BLOOM_POLICIES.get(name)
    if policy is None:
        return None  # an unknown filter cannot say "absent"; reading without it is safe
    return policy.from_params(body[1 + body[0] :], path, offset)
