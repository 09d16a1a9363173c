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

import java.io.Serializable;

/**
 * A native bulk load: tasks send their rows to their JVM's engine worker as Arrow and it stages
 * them as store files ({@link TaskRowWriter}); the driver commits every task's files all or
 * nothing, or aborts and deletes everything the job staged.
 *
 * {@link #begin} runs on the driver before any task: the worker builds the Python source's
 * bulk-load writer (connector/datasource.py RegionScanWriter), which checks the options, the
 * mapping and the DataFrame's columns (and creates a {@code newtable}), and hands it back
 * pickled; tasks and the commit carry it (ops {@code write_begin}, {@code write},
 * {@code write_commit}, {@code write_abort} in connector/jvm/PROTOCOL.md).
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
    ObjectNode req = settings.request("write_begin");
    req.put("mode", overwrite ? "overwrite" : "append");
    req.put("schema", schema.json());
    JsonNode reply = settings.call(req);
    return new RegionScanBatchWrite(settings, schema, reply.path("writer").asText(), reply.path("job").asText());
  }

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
    settings.call(req);
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
