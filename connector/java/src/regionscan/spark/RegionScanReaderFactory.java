package regionscan.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Columnar readers only: every task reads Arrow batches from the worker (a key-grouped scan's
 * {@link KeyedPartition} as the task it wraps). */
final class RegionScanReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;
  private final SourceSettings settings;

  RegionScanReaderFactory(SourceSettings settings) {
    this.settings = settings;
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("the regionscan source reads columnar batches only");
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    RegionScanPartition task = partition instanceof KeyedPartition
        ? ((KeyedPartition) partition).task : (RegionScanPartition) partition;
    return new ArrowPartitionReader(settings, task);
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }
}
