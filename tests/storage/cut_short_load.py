"""A bulk load cut short after its commit point, as the crash it stands for would leave it.

Written straight to the table's files (staged store files, the journal, one of the two file
moves), so the tests on local files and on the S3-compatible store start from the same state.
"""

from __future__ import annotations

import storage
from storage.cells import CellType, cells_to_batch
from storage.region.load_journal import STAGING_DIR, Journal, RegionEntry, write_journal
from storage.storefile import StoreFileWriter


def _stage(table_fs, job: str, region_id: str, rows: list[bytes]) -> str:
    path = f"{STAGING_DIR}/{job}/task0/{region_id}-cf.sf"
    table_fs.makedirs(path.rsplit("/", 1)[0])
    writer = StoreFileWriter(table_fs, path, family=b"cf")
    writer.append_batch(cells_to_batch([(r, b"cf", b"q", 10, CellType.PUT, b"loaded-" + r) for r in rows]))
    writer.finish()
    return path


def committed_but_not_rolled_forward(root: str) -> dict[bytes, bytes]:
    """Table ``t`` at ``root`` (two regions) with a bulk load committed (its journal written)
    whose roll-forward stopped halfway; returns the rows every reader must see."""
    with storage.connect(root) as conn:
        table = conn.create_table("t", {"cf": {}}, split_keys=[b"m"])
        table.put(b"a-old", {b"cf:q": b"old"})
        table.flush()
        infos = table.region_infos()
        fs = table.fs
        left = _stage(fs, "job1", infos[0].region_id, [b"b1", b"c1"])
        right = _stage(fs, "job1", infos[1].region_id, [b"n1", b"x1"])
        journal = Journal(
            "job1",
            "append",
            {
                infos[0].region_id: RegionEntry({"cf": ("000000000100.sf",)}, 0, (("cf", "000000000100.sf", left),)),
                infos[1].region_id: RegionEntry({"cf": ("000000000100.sf",)}, 0, (("cf", "000000000100.sf", right),)),
            },
        )
        write_journal(fs, journal)  # the commit point; then "crash" before any manifest changes
        # half of the roll-forward happened: the left file was moved, its manifest not saved
        fs.makedirs(f"regions/{infos[0].region_id}/cf")
        fs.rename(left, f"regions/{infos[0].region_id}/cf/000000000100.sf")
    return {b"a-old": b"old", b"b1": b"loaded-b1", b"c1": b"loaded-c1", b"n1": b"loaded-n1", b"x1": b"loaded-x1"}
