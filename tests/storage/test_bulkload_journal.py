"""A committed bulk load is seen whole by every later open, even if its commit was cut short.

The commit point is the journal; a crash after it but before every region
manifest was updated must leave a table that readers see with the whole
load and that the next writer finishes.
"""

from __future__ import annotations

import storage
from storage.region.load_journal import STAGING_DIR, read_journals
from cut_short_load import committed_but_not_rolled_forward


def test_readers_see_a_committed_load_whole_and_the_next_writer_finishes_it(tmp_path):
    root = str(tmp_path / "root")
    expected = committed_but_not_rolled_forward(root)
    with storage.connect(root, read_only=True) as conn:
        table = conn.table("t")
        assert {k: v[b"cf:q"] for k, v in table.scan()} == expected
        assert read_journals(table.fs)  # a reader changes nothing on disk
    with storage.connect(root) as conn:
        table = conn.table("t")
        assert {k: v[b"cf:q"] for k, v in table.scan()} == expected
        assert read_journals(table.fs) == []
        assert not table.fs.exists(f"{STAGING_DIR}/job1")
        table.check()
    with storage.connect(root) as conn:
        assert {k: v[b"cf:q"] for k, v in conn.table("t").scan()} == expected
