"""The engine worker's write ops: the JVM source's native bulk load (connector/java/PROTOCOL.md).

The JVM writes as the Python source's writer does, with that writer's own
code (:class:`connector.python_source.RegionScanWriter`, :mod:`storage.engine`):

* ``write_begin`` (driver, before any task): the writer is built (options,
  mapping and DataFrame columns checked; a ``newtable`` created, split at
  the quantiles of the driver's key sample when it sends one:
  :mod:`connector.write_splits`) and handed back pickled, with its job id
  (and ``cut_rows``, the sample rows where the regions start, when the
  key encoding keeps Spark's order of the key values: for a new table
  its cuts, for an existing one the first sampled key of each region);
* ``write`` (each task attempt): the request frame is followed by an Arrow
  IPC stream of the task's rows in Spark's Arrow types; they are staged as
  store files under ``.staging/<job>/<task>/`` and the reply carries what
  was staged (a pickled ``BulkLoadMessage``), the commit message of the task;
* ``write_commit`` (driver): every task's staged files are committed all or
  nothing (``commit_load``), and the mapping is stored with the table;
* ``write_abort`` (driver): the job's staging directory is deleted whole
  (and a table the job created is dropped: the write leaves what it found);
* ``write_status`` (driver): whether the job's load is committed, asked when
  the worker that ran ``write_commit`` died before it answered.

The worker that ran ``write_begin`` holds the job's staging lock
(:func:`storage.engine.hold_staging`) until the commit or abort: should
it, or the JVM that started it, be killed, the lock goes with it, and the
next writer to open the table deletes the job's staging folder.

Pickles travel only in requests that carry the worker's secret, as splits do.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, BinaryIO, Iterator

import numpy as np
import pyarrow as pa

from storage import InvalidArgument
from storage.engine import STAGING_DIR

from ..source_config import SourceConfig
from .protocol import pack_object, unpack_object

__all__ = ["write_begin", "write", "write_commit", "write_abort", "write_status"]

_LOG = logging.getLogger(__name__)
# the staging locks this worker holds, by job id: from write_begin to the job's commit or abort
_held: dict[str, Any] = {}
_held_lock = threading.Lock()
# task attempts this worker is staging, by job id: an abort waits for them (see write_abort)
_staging: dict[str, int] = {}
_staging_done = threading.Condition()
# how long an abort waits for this worker's attempts of the job to end (they see the abort marker
# when they finish writing, or their connection is reset as Spark kills them)
ABORT_WAIT_S = 60.0


def _hold(writer) -> None:
    """Take the job's staging lock for this process (once; another live holder is fine)."""
    from storage import TableLocked

    from storage.engine import hold_staging

    with _held_lock:
        if writer.job_id in _held:
            return
        try:
            _held[writer.job_id] = hold_staging(writer._table_fs(), writer.job_id)
        except TableLocked:
            pass  # a live worker holds it


def _release(writer) -> None:
    from storage.engine import release_staging

    with _held_lock:
        lock = _held.pop(writer.job_id, None)
    if lock is not None:
        release_staging(writer._table_fs(), writer.job_id, lock)


def _writer(req: dict):
    from ..python_source import RegionScanWriter

    if not isinstance(req.get("writer"), str):
        raise InvalidArgument("the request carries no writer (from write_begin)")
    return unpack_object(req["writer"], RegionScanWriter, "the writer")


def write_begin(req: dict) -> dict:
    """Build the job's writer on the driver: ``mode`` ``append`` or ``overwrite``, ``schema`` the
    DataFrame's StructType JSON.  Everything a write checks fails here, before any task."""
    from pyspark.sql.types import StructType

    from ..python_source import RegionScanWriter

    mode = req.get("mode")
    if mode not in ("append", "overwrite"):
        raise InvalidArgument(f"write_begin mode must be append or overwrite, got {mode!r}")
    text = req.get("schema")
    if not isinstance(text, str):
        raise InvalidArgument("write_begin needs the DataFrame's schema (StructType JSON)")
    config = SourceConfig.from_options(req.get("options") or {})
    from ..savemode import table_exists

    try:
        sample = _encoded_sample(config, req)
    except InvalidArgument:
        if not table_exists(config):
            raise  # the new table's splits need the sample: its bad key is this write's one line
        # regrouping a load into an existing table only saves files: its tasks meet the row (a
        # null key, a value the SerDe refuses) and report it as they would without a sample
        sample = None
    split_keys, cut_rows = _sampled_split_keys(config, sample)
    writer = RegionScanWriter(config, StructType.fromJson(json.loads(text)), mode == "overwrite", split_keys=split_keys)
    _hold(writer)
    reply = {"writer": pack_object(writer), "job": writer.job_id}
    if not writer.created and sample is not None and sample[2]:
        cut_rows = _existing_cut_rows(writer, sample)
    if cut_rows is not None:
        reply["cut_rows"] = cut_rows
    return reply


def _encoded_sample(config: SourceConfig, req: dict) -> tuple[pa.ChunkedArray, np.ndarray, bool] | None:
    """The driver's key sample (``sample``: base64 Arrow IPC of the key columns, ``sample_weights``:
    one per row) encoded by the write's SerDe as its tasks will encode the rows, with the weights
    and whether the encoding keeps Spark's order of the key values; None without a sample."""
    from ..python_source import fill_missing
    from ..write_splits import decode_sample, spark_order_matches

    if req.get("sample") is None:
        return None
    sample, weights = decode_sample(req.get("sample"), req.get("sample_weights"))
    if not sample.num_rows:
        return None
    serde = config.write_serde()
    encoded = pa.chunked_array([serde.serialize_batch(fill_missing(b, serde)).column(0).cast(pa.binary())
                                for b in sample.to_batches() if b.num_rows], pa.binary())
    return encoded, weights, spark_order_matches(sample, encoded)


def _sampled_split_keys(config: SourceConfig, sample: tuple[pa.ChunkedArray, np.ndarray, bool] | None,
                        ) -> tuple[list[bytes] | None, list[int] | None]:
    """Split keys for a table this write creates (``newtable``), cut at the quantiles of the
    encoded ``sample``; and, where the encoding keeps Spark's order of the key values, the sample
    rows of the cuts (the driver then sends each region's rows to one task).  ``(None, None)``
    without a sample or ``newtable``, or when the table exists."""
    from ..options import conf_int
    from ..savemode import table_exists
    from ..write_splits import sample_split_keys

    regions = conf_int(config.conf, "newtable", minimum=1)
    if sample is None or regions is None or regions < 2 or table_exists(config):
        return None, None
    encoded, weights, ordered = sample
    cuts = sample_split_keys(encoded, weights, regions)
    if cuts is None:
        return None, None
    return cuts[0], (cuts[1] if ordered else None)


def _existing_cut_rows(writer: Any, sample: tuple[pa.ChunkedArray, np.ndarray, bool]) -> list[int] | None:
    """For a load into an existing table: the sample rows where its regions start
    (:func:`connector.write_splits.region_cut_rows`), so each region's rows are staged by one task."""
    from ..write_splits import region_cut_rows

    return region_cut_rows(sample[0], [r.start for r in writer.regions])


def _drain(reader: Iterator[pa.RecordBatch]) -> None:
    """Read the rest of a stream whose rows are refused, so the reply reaches a sender that is still writing."""
    for _ in reader:
        pass


def write(req: dict, stream: BinaryIO) -> dict:
    """Stage one task attempt's rows, read as an Arrow IPC stream from ``stream``."""
    writer = _writer(req)
    task = req.get("task")
    if not isinstance(task, str) or not task or "/" in task or task.startswith("."):
        raise InvalidArgument(f"bad task id {task!r}")
    reader = pa.ipc.open_stream(stream)
    state = {"rows": 0, "broken": False}

    def batches() -> Iterator[pa.RecordBatch]:
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except (OSError, pa.ArrowInvalid):
                state["broken"] = True  # the JVM reset the connection: the task failed
                raise
            state["rows"] += batch.num_rows
            yield batch

    with _staging_done:  # counted before the attempt looks for the abort marker (BulkLoadTask)
        _staging[writer.job_id] = _staging.get(writer.job_id, 0) + 1
    try:
        message = writer.write_task(batches(), task)  # a failure abandons the attempt's files
    except Exception:
        if not state["broken"]:
            try:
                _drain(reader)  # the rows were refused: read on, so the sender gets the reason
            except (OSError, pa.ArrowInvalid):
                pass
        raise
    finally:
        with _staging_done:
            left = _staging.pop(writer.job_id) - 1
            if left:
                _staging[writer.job_id] = left
            _staging_done.notify_all()
    return {"staged": pack_object(message), "rows": state["rows"], "files": len(message.files)}


def write_commit(req: dict) -> dict:
    """Commit every task's staged files (``messages``: the ``staged`` of each ``write`` reply)."""
    from ..python_source import BulkLoadMessage

    writer = _writer(req)
    docs = req.get("messages")
    if not isinstance(docs, list):
        raise InvalidArgument("write_commit needs the list of the tasks' messages")
    messages = [unpack_object(doc, BulkLoadMessage, "a commit message") for doc in docs]
    if any(m.job_id != writer.job_id for m in messages):
        raise InvalidArgument("a commit message is not a staged-files message of this job")
    _hold(writer)  # the worker that began the job may have died: its folder must not look stale now
    try:
        writer.commit(messages, receipt=req.get("receipt") is True)
    finally:
        _release(writer)
    return {"files": sum(len(m.files) for m in messages)}


def write_status(req: dict) -> dict:
    """``committed``: whether the job's load is in the table (its journal or receipt is there);
    ``forget: true`` deletes the receipt.  Asked once the worker that ran the commit has ended."""
    from storage.engine import load_committed

    writer = _writer(req)
    return {"committed": load_committed(writer._table_fs(), writer.job_id, forget=req.get("forget") is True)}


def write_abort(req: dict) -> dict:
    """Delete everything the job staged (failed attempts' files too); drop the table if the job
    created it (``newtable``) and did not commit, so a failed write leaves what it found."""
    from storage.engine import abort_load, load_committed, staging_lock_path

    writer = _writer(req)
    try:
        aborted = abort_load(writer._table_fs(), writer.job_id)  # False: its journal says it committed
        if aborted:
            _await_attempts(writer)
    finally:
        _release(writer)
    if aborted:
        # The lock may be held by another worker of this driver (the one that ran write_begin, when
        # the abort reaches a different one): an aborted job's lock file goes all the same, so no
        # later sweep takes the job for a live one; that holder's lock on the unlinked file is
        # harmless and goes with it.
        writer._table_fs().delete(staging_lock_path(writer.job_id), missing_ok=True)
    if aborted and writer.created and not load_committed(writer._table_fs(), writer.job_id):
        _drop_created(writer)
    return {}


def _await_attempts(writer) -> None:
    """Wait (up to :data:`ABORT_WAIT_S`) until no attempt of the aborted job stages in this worker,
    then delete the job's folder once more.

    Spark aborts a V2 write as soon as one task fails, while others may still be staging; each of
    them discards its files when it sees the abort marker, and one that starts later stages
    nothing.  Waiting here makes the abort whole for every attempt this worker runs (all of them
    on a local master), so the job's folder is gone when the abort returns.  Attempts in other
    executors' workers discard their files the same way, on their own time.
    """
    deadline = time.monotonic() + ABORT_WAIT_S
    with _staging_done:
        while _staging.get(writer.job_id):
            left = deadline - time.monotonic()
            if left <= 0:
                _LOG.warning("bulk load %s aborted while %d of its task attempts still staged; they discard "
                             "their files when they end", writer.job_id, _staging[writer.job_id])
                return
            _staging_done.wait(left)
    writer._table_fs().delete_dir(f"{STAGING_DIR}/{writer.job_id}")


def _drop_created(writer) -> None:
    import storage

    conn = storage.connect(writer.config.root)
    try:
        if conn.is_table_available(writer.config.table):
            conn.delete_table(writer.config.table)
    except Exception as exc:  # noqa: BLE001 - the abort is done; say why the empty table stays
        _LOG.warning("bulk load %s failed; the table %s it created stays, empty: %s", writer.job_id,
                     writer.config.table, exc)
    finally:
        conn.close()
