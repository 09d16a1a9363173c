package regionscan.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.types.StructType;

/**
 * Pushed aggregates answered at planning (COUNT from the block indexes, MIN/MAX of the row key
 * from the first and last row keys): Spark runs no task for them.
 */
final class CountScan implements LocalScan {
  private final SourceSettings settings;
  private final StructType schema;
  private final Object[] values;
  private final String pushedFilters;
  private final String aggregation;

  CountScan(SourceSettings settings, StructType schema, Object[] values, String pushedFilters, String aggregation) {
    this.settings = settings;
    this.schema = schema;
    this.values = values;
    this.pushedFilters = pushedFilters;
    this.aggregation = aggregation;
  }

  @Override
  public InternalRow[] rows() {
    return new InternalRow[] {new GenericInternalRow(values.clone())};
  }

  @Override
  public StructType readSchema() {
    return schema;
  }

  @Override
  public String description() {
    return settings.tableName() + " PushedAggregation: " + aggregation + ", PushedFilters: " + pushedFilters
        + ", answered at planning (block indexes, first/last row keys)";
  }
}
