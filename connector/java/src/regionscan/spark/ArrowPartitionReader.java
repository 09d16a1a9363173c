package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.util.List;

/**
 * A task's rows: the worker's Arrow IPC stream, each batch wrapped as ArrowColumnVectors
 * (no copy). One RootAllocator per JVM and a child per task; the stream reader is closed
 * before its allocator, which then fails loudly if a buffer leaked.
 */
final class ArrowPartitionReader implements PartitionReader<ColumnarBatch> {
  static final BufferAllocator ROOT = new RootAllocator(Long.MAX_VALUE);
  private final WorkerProcess worker;
  private final WorkerProcess.Exchange exchange;
  private final BufferAllocator allocator;
  private final ArrowStreamReader reader;
  private final ReadTimeline.Task timeline;  // null unless spark.regionscan.debug.timeline is set
  private final int splits;
  private ColumnarBatch batch;
  private StreamColumnVector[] columns;  // the batch's columns, told of every batch loaded
  private boolean finished;

  ArrowPartitionReader(SourceSettings settings, RegionScanPartition partition) {
    long started = System.nanoTime();
    String timelinePath = ReadTimeline.target();
    WorkerProcess w;
    WorkerProcess.Exchange ex = null;
    try {
      w = settings.worker();
    } catch (IOException e) {
      throw EngineFailure.raise(e.getMessage(), e);
    }
    ObjectNode req;
    try {
      req = (ObjectNode) WorkerProcess.JSON.readTree(partition.request);
    } catch (IOException e) {
      throw EngineFailure.raise("a regionscan task carries a bad request: " + e.getMessage(), e);
    }
    // A worker that is gone before it answers has sent nothing: a read changes nothing, so the
    // task goes once to a new worker (one killed a moment ago may still have taken the connection).
    for (int attempt = 0; ; attempt++) {
      try {
        ex = w.open(req);
        JsonNode head = ex.readFrame();
        if (!head.path("ok").asBoolean(false)) {
          ex.close();
          throw EngineFailure.raise(w.taskError(head.path("error").asText("the regionscan engine worker gave no reason")), null);
        }
        break;
      } catch (IOException e) {
        closeQuietly(ex);
        String line = w.died("a read", e);
        boolean gone = e instanceof java.net.ConnectException || !w.process.isAlive();
        WorkerProcess.forget(w);
        if (attempt > 0 || !gone) {
          throw EngineFailure.raise(line, e);
        }
        try {
          w = settings.worker();
        } catch (IOException again) {
          throw EngineFailure.raise(again.getMessage(), again);
        }
      }
    }
    this.worker = w;
    this.exchange = ex;
    this.splits = req.path("splits").size();
    this.allocator = ROOT.newChildAllocator("regionscan-task", 0, Long.MAX_VALUE);
    if (timelinePath != null) {
      timeline = new ReadTimeline.Task(timelinePath, ex.in, started);
      timeline.open = System.nanoTime() - started;
      this.reader = new ArrowStreamReader(new StreamChannel(timeline.in), allocator);
    } else {
      timeline = null;
      this.reader = new ArrowStreamReader(new StreamChannel(ex.in), allocator);
    }
  }

  /**
   * The task's stream as the channel the Arrow reader fills its batch buffers from. Arrow's own
   * wrapper of an InputStream moves the bytes 8 KiB at a time through the connection's 64 KiB
   * buffer; this one asks for up to {@link #CHUNK} at once, which the buffered stream reads
   * from the socket straight into the chunk (no pass through its own buffer), then copies the
   * chunk into the batch's memory: one copy of the stream fewer, and an eighth of the calls.
   * It never reads past what the reader asks for, so the trailer frame after the stream is
   * still the connection's to read. The chunk is the task's: one per task, reused.
   */
  static final class StreamChannel implements ReadableByteChannel {
    static final int CHUNK = 1 << 18;
    private final InputStream in;
    private final byte[] chunk = new byte[CHUNK];
    private boolean open = true;

    StreamChannel(InputStream in) {
      this.in = in;
    }

    @Override
    public int read(ByteBuffer dst) throws IOException {
      int want = dst.remaining();
      if (want == 0) {
        return 0;
      }
      if (dst.hasArray()) {
        int n = in.read(dst.array(), dst.arrayOffset() + dst.position(), want);
        if (n > 0) {
          dst.position(dst.position() + n);
        }
        return n;
      }
      int n = in.read(chunk, 0, Math.min(want, CHUNK));
      if (n > 0) {
        dst.put(chunk, 0, n);
      }
      return n;
    }

    @Override
    public boolean isOpen() {
      return open;
    }

    @Override
    public void close() {
      open = false;  // the connection is the exchange's to close
    }
  }

  @Override
  public boolean next() throws IOException {
    if (finished) {
      return false;
    }
    long asked = timeline != null ? System.nanoTime() : 0;
    if (timeline != null && timeline.lastReturn != 0) {
      timeline.spark += asked - timeline.lastReturn;
    }
    try {
      if (batch == null) {
        VectorSchemaRoot root = reader.getVectorSchemaRoot();
        List<FieldVector> vectors = root.getFieldVectors();
        columns = new StreamColumnVector[vectors.size()];
        for (int i = 0; i < columns.length; i++) {
          columns[i] = new StreamColumnVector(vectors.get(i));
        }
        batch = new ColumnarBatch(columns);
      }
      boolean loaded = reader.loadNextBatch();
      if (timeline != null) {
        timeline.lastReturn = System.nanoTime();
        timeline.load += timeline.lastReturn - asked;
      }
      if (loaded) {
        for (StreamColumnVector column : columns) {
          column.refresh();  // the loaded batch's buffers: the columns read them at their addresses
        }
        batch.setNumRows(reader.getVectorSchemaRoot().getRowCount());
        if (timeline != null) {
          timeline.batches++;
          timeline.rows += batch.numRows();
        }
        return true;
      }
      finished = true;
      JsonNode trailer = exchange.readFrame();
      if (!trailer.path("ok").asBoolean(false)) {
        throw new WorkerProcess.Answered(trailer.path("error").asText("the regionscan engine worker gave no reason"));
      }
      return false;
    } catch (WorkerProcess.Answered refused) {
      throw EngineFailure.raise(worker.taskError(refused.getMessage()), null);
    } catch (IOException | RuntimeException e) {
      // Anything else breaking the stream ("Unexpected end of input. Missing schema.", a reset, a
      // truncated batch) is the worker going away mid-read: said with its pid, exit and log.
      String line = worker.died("a read", e);
      WorkerProcess.forget(worker);
      throw EngineFailure.raise(line, e);
    }
  }

  private static void closeQuietly(WorkerProcess.Exchange ex) {
    if (ex != null) {
      try {
        ex.close();
      } catch (IOException ignored) {
        // closing a connection to a worker that is gone
      }
    }
  }

  @Override
  public ColumnarBatch get() {
    return batch;
  }

  @Override
  public void close() throws IOException {
    try {
      reader.close();
    } finally {
      exchange.close();
      allocator.close();
      if (timeline != null) {
        timeline.finish(splits);
      }
    }
  }
}
