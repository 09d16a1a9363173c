package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.types.StructType;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.channels.Channels;

/**
 * One task attempt's rows, sent to this JVM's engine worker as an Arrow IPC stream and staged
 * there as store files (op {@code write}, connector/java/PROTOCOL.md).
 *
 * Rows are converted with Spark's own {@link ArrowWriter} into batches of {@link #BATCH_ROWS}
 * rows (or fewer past {@link #BATCH_BYTES}); the stream opens with the first row. {@link #commit()}
 * ends the stream and returns what the worker staged, the task's commit message;
 * {@link #abort()} drops the connection, and the worker abandons the attempt's files.
 */
final class TaskRowWriter implements DataWriter<InternalRow> {
  static final int BATCH_ROWS = 8192;
  static final long BATCH_BYTES = 8L << 20;

  /** What one task attempt staged: the worker's pickled message, handed back at the commit. */
  static final class Staged implements WriterCommitMessage {
    private static final long serialVersionUID = 1L;
    final String staged;
    final long rows;

    Staged(String staged, long rows) {
      this.staged = staged;
      this.rows = rows;
    }
  }

  private final SourceSettings settings;
  private final String writer;
  private final String taskId;
  private final StructType schema;
  private WorkerProcess worker;
  private WorkerProcess.Exchange exchange;
  private ArrowWriter arrow;
  private VectorSchemaRoot root;
  private ArrowStreamWriter stream;
  private OutputStream out;
  private int pending;
  private boolean done;

  TaskRowWriter(SourceSettings settings, String writer, StructType schema, int partition, long attempt) {
    this.settings = settings;
    this.writer = writer;
    this.schema = schema;
    this.taskId = String.format("p%05d-a%03d", partition, attempt);
  }

  private void open() {
    ObjectNode req = settings.request("write");
    req.put("writer", writer);
    req.put("task", taskId);
    try {
      worker = settings.worker();
      try {
        exchange = worker.open(req);
      } catch (java.net.ConnectException gone) {
        // the worker was gone before the request (nothing sent): a new one stages the task
        WorkerProcess.forget(worker);
        worker = settings.worker();
        exchange = worker.open(req);
      }
      out = new BufferedOutputStream(exchange.socket.getOutputStream(), 1 << 16);
    } catch (IOException e) {
      if (worker == null) {
        throw EngineFailure.raise(e.getMessage(), e);
      }
      String line = worker.died("the write of task " + taskId, e);
      WorkerProcess.forget(worker);
      throw EngineFailure.raise(line, e);
    }
    arrow = ArrowWriter.create(schema, "UTC", true, false);
    root = arrow.root();
    stream = new ArrowStreamWriter(root, null, Channels.newChannel(out));
    try {
      stream.start();
    } catch (IOException e) {
      throw failed(e);
    }
  }

  @Override
  public void write(InternalRow row) throws IOException {
    if (stream == null) {
      open();
    }
    try {
      arrow.write(row);
      pending++;
      if (pending >= BATCH_ROWS || (pending % 256 == 0 && arrow.sizeInBytes() >= BATCH_BYTES)) {
        flush();
      }
    } catch (IOException e) {
      throw failed(e);
    }
  }

  private void flush() throws IOException {
    if (pending == 0) {
      return;
    }
    arrow.finish();
    stream.writeBatch();
    arrow.reset();
    pending = 0;
  }

  /**
   * The task's one-line failure, thrown (see {@link EngineFailure}): the worker's reason when it
   * refused the rows (its reply frame), else its death or failure, with its pid and log.
   */
  private RuntimeException failed(IOException cause) {
    String reason = null;
    try {
      JsonNode reply = exchange.readFrame();
      if (!reply.path("ok").asBoolean(false)) {
        reason = reply.path("error").asText(null);
      }
    } catch (IOException ignored) {
      // no reply: the worker went away
    }
    close();
    if (reason != null) {
      throw EngineFailure.raise(worker.taskError(reason), null);
    }
    String line = worker.died("the write of task " + taskId, cause);
    WorkerProcess.forget(worker);
    throw EngineFailure.raise(line, cause);
  }

  @Override
  public WriterCommitMessage commit() throws IOException {
    if (stream == null) {
      open();  // no rows: an empty stream still tells the worker the attempt is done
    }
    JsonNode reply;
    try {
      flush();
      stream.end();
      out.flush();
      reply = exchange.readFrame();
    } catch (IOException e) {
      throw failed(e);
    }
    done = true;
    close();
    if (!reply.path("ok").asBoolean(false)) {
      throw EngineFailure.raise(worker.taskError(reply.path("error").asText("the regionscan engine worker gave no reason")), null);
    }
    return new Staged(reply.path("staged").asText(), reply.path("rows").asLong());
  }

  @Override
  public void abort() {
    close();  // the worker sees the stream break and abandons this attempt's files
  }

  @Override
  public void close() {
    if (stream != null) {
      try {
        if (!done) {
          exchange.socket.setSoLinger(true, 0);  // a reset, not an end of stream: the worker must not commit
        }
        exchange.close();
      } catch (IOException ignored) {
        // closing anyway
      }
      root.close();
      stream = null;
    }
  }
}
