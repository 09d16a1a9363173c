package regionscan.spark;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.Collections;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

/**
 * A regionscan table read through the engine worker; a scan builder is made per query.
 * Made by the provider ({@code format("regionscan")}: read only, its writes are V1, see
 * {@link RegionScanProvider}) or by {@link RegionScanCatalog}, which names it as the catalog
 * does, shows its stored mapping as table properties, and writes to it
 * ({@link RegionScanWriteBuilder}: append, or truncate and load).
 */
final class RegionScanTable implements SupportsRead, SupportsWrite {
  private final SourceSettings settings;
  private final StructType schema;
  private final String name;
  private final Map<String, String> properties;
  private final boolean catalogTable;  // made by RegionScanCatalog: takes V2 writes

  RegionScanTable(SourceSettings settings, StructType schema) {
    this(settings, schema, null, Collections.emptyMap());
  }

  RegionScanTable(SourceSettings settings, StructType schema, String name, Map<String, String> properties) {
    this.settings = settings;
    this.schema = schema;
    this.name = name;
    this.properties = properties;
    this.catalogTable = name != null;
  }

  @Override
  public String name() {
    return name != null ? name : settings.tableName();
  }

  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return schema;
  }

  @Override
  public Map<String, String> properties() {
    return properties;
  }

  @Override
  public Set<TableCapability> capabilities() {
    if (!catalogTable) {
      return EnumSet.of(TableCapability.BATCH_READ);
    }
    return EnumSet.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE, TableCapability.TRUNCATE);
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    if (!catalogTable) {
      throw new UnsupportedOperationException("write with df.write.format(\"regionscan\") or through the catalog");
    }
    return new RegionScanWriteBuilder(settings, info);
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    return new RegionScanBuilder(settings, schema);
  }
}
