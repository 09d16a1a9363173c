package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.StructType;

import java.io.IOException;
import java.io.Serializable;

/**
 * A native bulk load: tasks send their rows to their JVM's engine worker as Arrow and it stages
 * them as store files ({@link TaskRowWriter}); the driver commits every task's files all or
 * nothing, or aborts and deletes everything the job staged.
 *
 * {@link #begin} runs on the driver before any task: the worker builds the Python source's
 * bulk-load writer (connector/python_source.py RegionScanWriter), which checks the options, the
 * mapping and the DataFrame's columns (and creates a {@code newtable}), and hands it back
 * pickled; tasks and the commit carry it (ops {@code write_begin}, {@code write},
 * {@code write_commit}, {@code write_abort} in connector/java/PROTOCOL.md).
 */
final class RegionScanBatchWrite implements BatchWrite, Serializable {
  private static final long serialVersionUID = 1L;
  final SourceSettings settings;
  final StructType schema;
  final String writer;
  final String job;

  private RegionScanBatchWrite(SourceSettings settings, StructType schema, String writer, String job) {
    this.settings = settings;
    this.schema = schema;
    this.writer = writer;
    this.job = job;
  }

  /** Start a write of rows of {@code schema}, appending or replacing the table's rows. */
  static RegionScanBatchWrite begin(SourceSettings settings, StructType schema, boolean overwrite) {
    return begin(settings, schema, overwrite, req -> { });
  }

  /** As {@link #begin(SourceSettings, StructType, boolean)}, {@code extra} adding to the request (a key sample). */
  static RegionScanBatchWrite begin(SourceSettings settings, StructType schema, boolean overwrite,
      java.util.function.Consumer<ObjectNode> extra) {
    ObjectNode req = settings.request("write_begin");
    req.put("mode", overwrite ? "overwrite" : "append");
    req.put("schema", schema.json());
    extra.accept(req);
    JsonNode reply = settings.call(req);
    RegionScanBatchWrite write = new RegionScanBatchWrite(settings, schema, reply.path("writer").asText(),
        reply.path("job").asText());
    if (reply.path("cut_rows").isArray()) {
      write.cutRows = new int[reply.path("cut_rows").size()];
      for (int i = 0; i < write.cutRows.length; i++) {
        write.cutRows[i] = reply.path("cut_rows").get(i).asInt();
      }
    }
    return write;
  }

  /** The key sample's rows where the table's regions start ({@link KeySample#byRegion}), or null. */
  transient int[] cutRows;

  /** Makes each task's {@link TaskRowWriter}. */
  static final class Factory implements DataWriterFactory {
    private static final long serialVersionUID = 1L;
    private final SourceSettings settings;
    private final String writer;
    private final StructType schema;

    Factory(SourceSettings settings, String writer, StructType schema) {
      this.settings = settings;
      this.writer = writer;
      this.schema = schema;
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
      org.apache.spark.TaskContext ctx = org.apache.spark.TaskContext.get();
      long attempt = ctx != null ? ctx.attemptNumber() : taskId;
      return new TaskRowWriter(settings, writer, schema, partitionId, attempt);
    }
  }

  Factory factory() {
    return new Factory(settings, writer, schema);
  }

  @Override
  public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
    return factory();
  }

  /** Commits decided after the worker died with the commit's reply unsent (for tests and diagnostics). */
  static final java.util.concurrent.atomic.AtomicLong DECIDED_AFTER_DEATH = new java.util.concurrent.atomic.AtomicLong();

  /** How many commits were decided after their worker died before it answered. */
  public static long decidedAfterDeath() {
    return DECIDED_AFTER_DEATH.get();
  }

  /**
   * Commit every task's staged files, all or nothing.
   *
   * A worker that dies during the commit may have passed its commit point (the load's journal)
   * before it could answer. Then the load is in the table, and failing would make a re-run apply
   * it twice; so the answer is decided, not guessed: once the dead worker's process has ended, a
   * new worker looks for the job's journal or commit receipt ({@code write_status}) and the
   * commit succeeds if either is there, else fails in one line (and the job is aborted).
   */
  @Override
  public void commit(WriterCommitMessage[] messages) {
    ObjectNode req = settings.request("write_commit");
    req.put("writer", writer);
    ArrayNode staged = req.putArray("messages");
    for (WriterCommitMessage m : messages) {
      if (m != null) {
        staged.add(((TaskRowWriter.Staged) m).staged);
      }
    }
    req.put("receipt", true);
    WorkerProcess worker;
    try {
      worker = settings.worker();
    } catch (IOException e) {
      throw new IllegalArgumentException(e.getMessage(), null);
    }
    try {
      worker.call(req);
    } catch (WorkerProcess.Answered refused) {
      throw new IllegalArgumentException(refused.getMessage(), null);  // e.g. the table is locked: nothing committed
    } catch (WorkerProcess.Refused gone) {
      settings.call(req);  // nothing was sent: once more, to a new worker
    } catch (IOException lost) {
      worker.awaitExit(30_000);  // no committer may be left running when the journal is looked for
      if (!status(true)) {
        throw EngineFailure.raise(lost.getMessage() + "; the load was not committed", lost);
      }
      DECIDED_AFTER_DEATH.incrementAndGet();
      org.slf4j.LoggerFactory.getLogger(RegionScanBatchWrite.class).warn(
          "bulk load {} into {} is committed; its worker died before it could say so: {}", job,
          settings.tableName(), lost.getMessage());
      return;
    }
    try {
      status(true);  // drops the receipt: the answer came
    } catch (RuntimeException ignored) {
      // the load is committed; an old receipt is dropped by a later commit
    }
  }

  /** Whether the job's load is committed (its journal or receipt is there); {@code forget} drops the receipt. */
  private boolean status(boolean forget) {
    ObjectNode req = settings.request("write_status");
    req.put("writer", writer);
    req.put("forget", forget);
    return settings.call(req).path("committed").asBoolean(false);
  }

  @Override
  public void abort(WriterCommitMessage[] messages) {
    ObjectNode req = settings.request("write_abort");
    req.put("writer", writer);
    settings.call(req);
  }

  @Override
  public String toString() {
    return "RegionScanBatchWrite(" + settings.tableName() + ", job " + job + ")";
  }
}
