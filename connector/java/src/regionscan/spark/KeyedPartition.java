package regionscan.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.HasPartitionKey;
import org.apache.spark.sql.connector.read.InputPartition;

/** A task of a key-grouped scan: its partition value is its index ({@link TaskIndexFunction}). */
final class KeyedPartition implements InputPartition, HasPartitionKey {
  private static final long serialVersionUID = 1L;
  final RegionScanPartition task;
  private final int index;

  KeyedPartition(RegionScanPartition task, int index) {
    this.task = task;
    this.index = index;
  }

  @Override
  public InternalRow partitionKey() {
    return new GenericInternalRow(new Object[] {index});
  }

  @Override
  public String[] preferredLocations() {
    return task.preferredLocations();
  }
}
