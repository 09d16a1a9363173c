package regionscan.spark;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.Map;
import java.util.Set;

/**
 * A table loaded by {@link RegionScanCatalog}: the catalog's {@link RegionScanTable}, whose scans
 * also report their tasks as key-grouped partitioning ({@link RegionScanScan#outputPartitioning}),
 * since the catalog is the function catalog that resolves the transform they report.
 */
final class CatalogTable implements SupportsRead, SupportsWrite {
  private final RegionScanTable table;
  private final SourceSettings settings;
  private final StructType schema;

  CatalogTable(SourceSettings settings, StructType schema, String name, Map<String, String> properties) {
    this.table = new RegionScanTable(settings, schema, name, properties);
    this.settings = settings;
    this.schema = schema;
  }

  @Override
  public String name() {
    return table.name();
  }

  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return schema;
  }

  @Override
  public Map<String, String> properties() {
    return table.properties();
  }

  @Override
  public Set<TableCapability> capabilities() {
    return table.capabilities();
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return table.newWriteBuilder(info);
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    return new RegionScanBuilder(settings, schema, true);
  }
}
