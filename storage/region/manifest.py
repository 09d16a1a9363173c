"""Table and region manifests: which regions a table has, which files a region has.

Both are small documents written with :mod:`storage.region.framing` (magic, version,
length, CRC32, JSON payload) and replaced atomically (write a temporary file,
fsync, rename, fsync the directory), so after a crash a reader finds either
the old or the new manifest, never a mix.  Row keys are stored as hex strings.
See docs/formats/manifest.md for the payload fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CorruptionError
from ..vfs.fs import FileSystem
from .framing import decode_document, encode_document

__all__ = ["RegionInfo", "TableManifest", "RegionManifest", "TABLE_MANIFEST", "REGION_MANIFEST", "TABLE_LOCK"]

TABLE_MANIFEST = "TABLE.manifest"
REGION_MANIFEST = "REGION.manifest"
TABLE_LOCK = ".lock"
"""The table folder's writer lock file: one writer process at a time opens, alters or bulk-loads the table."""
_TABLE_KIND = b"RSTABLE1"
_REGION_KIND = b"RSREGIO1"
_VERSION = 1


def _hex(key: bytes | None) -> str | None:
    return None if key is None else key.hex()


def _unhex(text: str | None, path: str) -> bytes | None:
    if text is None:
        return None
    try:
        return bytes.fromhex(text)
    except (TypeError, ValueError):
        raise CorruptionError(f"bad row key {text!r} in manifest", path) from None


@dataclass(frozen=True)
class RegionInfo:
    """A region's identity and key range [start, end); end None means unbounded."""

    region_id: str
    start: bytes
    end: bytes | None

    def contains(self, row: bytes) -> bool:
        return self.start <= row and (self.end is None or row < self.end)

    @property
    def name(self) -> str:
        """HBase-style region name: table,startkey,id (the table name is added by the table)."""
        return f"{self.start.hex()},{self.region_id}"


@dataclass
class TableManifest:
    """The table's families, settings and ordered regions."""

    name: str
    families: dict[str, dict]
    settings: dict
    regions: list[RegionInfo]
    next_region_id: int = 0
    generation: int = 0

    def encode(self) -> bytes:
        payload = {
            "name": self.name,
            "families": self.families,
            "settings": self.settings,
            "regions": [
                {"id": r.region_id, "start": _hex(r.start), "end": _hex(r.end)} for r in self.regions
            ],
            "next_region_id": self.next_region_id,
            "generation": self.generation,
        }
        return encode_document(_TABLE_KIND, _VERSION, payload)

    @classmethod
    def decode(cls, data: bytes, path: str) -> "TableManifest":
        doc = decode_document(data, _TABLE_KIND, path)
        try:
            regions = [RegionInfo(r["id"], _unhex(r["start"], path), _unhex(r["end"], path)) for r in doc["regions"]]
            manifest = cls(
                name=doc["name"],
                families=doc["families"],
                settings=doc["settings"],
                regions=regions,
                next_region_id=doc["next_region_id"],
                generation=doc.get("generation", 0),
            )
        except (KeyError, TypeError) as exc:
            raise CorruptionError(f"table manifest lacks field {exc}", path) from None
        manifest.check(path)
        return manifest

    def check(self, path: str = "<table manifest>") -> None:
        """Verify the regions tile the key space in order, without gaps or overlaps."""
        if not self.regions:
            raise CorruptionError("table manifest has no regions", path)
        if self.regions[0].start != b"":
            raise CorruptionError("first region does not start at the empty key", path)
        if self.regions[-1].end is not None:
            raise CorruptionError("last region does not end at the open end", path)
        for left, right in zip(self.regions, self.regions[1:]):
            if left.end != right.start or left.end is None or left.start >= left.end:
                raise CorruptionError(f"regions {left.region_id} and {right.region_id} do not meet", path)

    def save(self, fs: FileSystem) -> None:
        self.generation += 1
        fs.write_atomic(TABLE_MANIFEST, self.encode())

    @classmethod
    def load(cls, fs: FileSystem) -> "TableManifest":
        return cls.decode(fs.read_bytes(TABLE_MANIFEST), fs.uri(TABLE_MANIFEST))


@dataclass
class RegionManifest:
    """A region's live store files per family (newest last) and its flushed sequence id."""

    region_id: str
    files: dict[str, list[str]] = field(default_factory=dict)
    flushed_seq_id: int = 0
    next_file_id: int = 1
    generation: int = 0

    def encode(self) -> bytes:
        payload = {
            "region_id": self.region_id,
            "files": self.files,
            "flushed_seq_id": self.flushed_seq_id,
            "next_file_id": self.next_file_id,
            "generation": self.generation,
        }
        return encode_document(_REGION_KIND, _VERSION, payload)

    @classmethod
    def decode(cls, data: bytes, path: str) -> "RegionManifest":
        doc = decode_document(data, _REGION_KIND, path)
        try:
            manifest = cls(
                region_id=doc["region_id"],
                files={k: list(v) for k, v in doc["files"].items()},
                flushed_seq_id=int(doc["flushed_seq_id"]),
                next_file_id=int(doc["next_file_id"]),
                generation=int(doc.get("generation", 0)),
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise CorruptionError(f"region manifest has a bad field ({exc})", path) from None
        return manifest

    def save(self, fs: FileSystem) -> None:
        self.generation += 1
        fs.write_atomic(REGION_MANIFEST, self.encode())

    @classmethod
    def load(cls, fs: FileSystem) -> "RegionManifest":
        return cls.decode(fs.read_bytes(REGION_MANIFEST), fs.uri(REGION_MANIFEST))

    def new_file_name(self) -> str:
        name = f"{self.next_file_id:012d}.sf"
        self.next_file_id += 1
        return name
