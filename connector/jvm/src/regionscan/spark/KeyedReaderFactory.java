package regionscan.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** The readers of a key-grouped scan's tasks ({@link KeyedPartition}): as any task's. */
final class KeyedReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;
  private final SourceSettings settings;

  KeyedReaderFactory(SourceSettings settings) {
    this.settings = settings;
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("the regionscan source reads columnar batches only");
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    return new ArrowPartitionReader(settings, ((KeyedPartition) partition).task);
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }
}
