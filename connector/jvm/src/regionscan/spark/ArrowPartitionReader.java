package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import java.io.IOException;
import java.util.List;

/**
 * A task's rows: the worker's Arrow IPC stream, each batch wrapped as ArrowColumnVectors
 * (no copy). One RootAllocator per JVM and a child per task; the stream reader is closed
 * before its allocator, which then fails loudly if a buffer leaked.
 */
final class ArrowPartitionReader implements PartitionReader<ColumnarBatch> {
  static final BufferAllocator ROOT = new RootAllocator(Long.MAX_VALUE);
  private final EngineWorker worker;
  private final EngineWorker.Exchange exchange;
  private final BufferAllocator allocator;
  private final ArrowStreamReader reader;
  private ColumnarBatch batch;
  private boolean finished;

  ArrowPartitionReader(SourceSettings settings, RegionScanPartition partition) {
    EngineWorker w;
    EngineWorker.Exchange ex;
    try {
      w = settings.worker();
    } catch (IOException e) {
      throw new IllegalStateException(e.getMessage(), null);
    }
    try {
      ObjectNode req = (ObjectNode) EngineWorker.JSON.readTree(partition.request);
      try {
        ex = w.open(req);
      } catch (java.net.ConnectException gone) {
        // the worker was gone before the request (nothing sent): a new one reads the task
        EngineWorker.forget(w);
        w = settings.worker();
        ex = w.open(req);
      }
      JsonNode head = ex.readFrame();
      if (!head.path("ok").asBoolean(false)) {
        ex.close();
        throw new IllegalStateException(head.path("error").asText("the regionscan engine worker gave no reason"), null);
      }
    } catch (IOException e) {
      EngineWorker.forget(w);
      throw new IllegalStateException(w.died("a read", e), null);
    }
    this.worker = w;
    this.exchange = ex;
    this.allocator = ROOT.newChildAllocator("regionscan-task", 0, Long.MAX_VALUE);
    this.reader = new ArrowStreamReader(ex.in, allocator);
  }

  @Override
  public boolean next() throws IOException {
    if (finished) {
      return false;
    }
    try {
      if (batch == null) {
        VectorSchemaRoot root = reader.getVectorSchemaRoot();
        List<FieldVector> vectors = root.getFieldVectors();
        ColumnVector[] columns = new ColumnVector[vectors.size()];
        for (int i = 0; i < columns.length; i++) {
          columns[i] = new ArrowColumnVector(vectors.get(i));
        }
        batch = new ColumnarBatch(columns);
      }
      if (reader.loadNextBatch()) {
        batch.setNumRows(reader.getVectorSchemaRoot().getRowCount());
        return true;
      }
      finished = true;
      JsonNode trailer = exchange.readFrame();
      if (!trailer.path("ok").asBoolean(false)) {
        throw new IOException(trailer.path("error").asText("the regionscan engine worker gave no reason"));
      }
      return false;
    } catch (IOException e) {
      if (!worker.process.isAlive() || e.getMessage() == null || e instanceof java.io.EOFException
          || e instanceof java.net.SocketException) {
        EngineWorker.forget(worker);
        throw new IOException(worker.died("a read", e), null);
      }
      throw e;
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
    }
  }
}
