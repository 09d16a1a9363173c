package regionscan.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.types.StructType;

/** A pushed COUNT answered at planning (block-index row counts): Spark runs no task for it. */
final class CountScan implements LocalScan {
  private final SourceSettings settings;
  private final StructType schema;
  private final long[] values;
  private final String pushedFilters;
  private final String aggregation;

  CountScan(SourceSettings settings, StructType schema, long[] values, String pushedFilters, String aggregation) {
    this.settings = settings;
    this.schema = schema;
    this.values = values;
    this.pushedFilters = pushedFilters;
    this.aggregation = aggregation;
  }

  @Override
  public InternalRow[] rows() {
    Object[] cells = new Object[values.length];
    for (int i = 0; i < values.length; i++) {
      cells[i] = values[i];
    }
    return new InternalRow[] {new GenericInternalRow(cells)};
  }

  @Override
  public StructType readSchema() {
    return schema;
  }

  @Override
  public String description() {
    return settings.tableName() + " PushedAggregation: " + aggregation + ", PushedFilters: " + pushedFilters
        + ", answered from the block indexes";
  }
}
