package regionscan.spark;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.EnumSet;
import java.util.Set;

/** A regionscan table read through the engine worker; a scan builder is made per query. */
final class RegionScanTable implements SupportsRead {
  private final SourceSettings settings;
  private final StructType schema;

  RegionScanTable(SourceSettings settings, StructType schema) {
    this.settings = settings;
    this.schema = schema;
  }

  @Override
  public String name() {
    return settings.tableName();
  }

  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return schema;
  }

  @Override
  public Set<TableCapability> capabilities() {
    return EnumSet.of(TableCapability.BATCH_READ);
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    return new RegionScanBuilder(settings, schema);
  }
}
