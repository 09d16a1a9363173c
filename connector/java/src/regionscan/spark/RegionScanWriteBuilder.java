package regionscan.spark;

import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;

/**
 * Writes to a catalog table ({@code df.writeTo("rs.t").append()}, {@code INSERT INTO rs.t},
 * {@code INSERT OVERWRITE}): an append, or with {@link #truncate()} a bulk load that replaces
 * the table's rows (connector/savemode.py's overwrite), as one {@link RegionScanBatchWrite}.
 */
final class RegionScanWriteBuilder implements WriteBuilder, SupportsTruncate {
  private final SourceSettings settings;
  private final LogicalWriteInfo info;
  private boolean overwrite;

  RegionScanWriteBuilder(SourceSettings settings, LogicalWriteInfo info) {
    this.settings = settings;
    this.info = info;
  }

  @Override
  public WriteBuilder truncate() {
    overwrite = true;
    return this;
  }

  @Override
  public Write build() {
    boolean replace = overwrite;
    return new Write() {
      @Override
      public String description() {
        return "regionscan bulk load (" + (replace ? "overwrite" : "append") + ") into " + settings.tableName();
      }

      @Override
      public BatchWrite toBatch() {
        return RegionScanBatchWrite.begin(settings, info.schema(), replace);
      }
    };
  }
}
