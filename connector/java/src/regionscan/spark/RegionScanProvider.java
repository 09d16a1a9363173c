package regionscan.spark;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.CreatableRelationProvider;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Properties;

/**
 * {@code spark.read.format("regionscan")}: a DataSource V2 over the regionscan engine.
 *
 * The schema comes from the mapping (the worker's SerDe); a user schema narrows it.
 * Planning and reading go to this JVM's engine worker ({@link WorkerProcess}). Writes
 * ({@code df.write.format("regionscan")}) are native bulk loads ({@link NativeWrite}): each
 * task sends its rows to its JVM's worker as Arrow, which stages store files, and the driver
 * commits them all or nothing. Every SaveMode works: the worker decides on the driver, before
 * any task, whether the table exists (ErrorIfExists fails in one line, Ignore writes nothing)
 * and the write then runs as Append or Overwrite (connector/savemode.py). This stays a V1
 * {@code CreatableRelationProvider}: Spark refuses ErrorIfExists and Ignore for a V2 table
 * without a catalog, so the provider's tables are read-only and catalog tables
 * ({@link RegionScanCatalog}) take V2 writes.
 */
public final class RegionScanProvider implements TableProvider, DataSourceRegister, CreatableRelationProvider {
  /** The Spark version this jar was compiled against (from the jar's build.properties). */
  static final String BUILT_FOR = builtFor();

  private static String builtFor() {
    try (InputStream in = RegionScanProvider.class.getResourceAsStream("/regionscan-build.properties")) {
      if (in == null) {
        return null;
      }
      Properties p = new Properties();
      p.load(new java.io.InputStreamReader(in, StandardCharsets.UTF_8));
      return p.getProperty("spark.version");
    } catch (IOException e) {
      return null;
    }
  }

  static void checkVersion() {
    String running = org.apache.spark.package$.MODULE$.SPARK_VERSION();
    if (BUILT_FOR != null && !BUILT_FOR.equals(running)) {
      throw new IllegalStateException("the regionscan JVM source was built for Spark " + BUILT_FOR
          + " but this is Spark " + running + ": rebuild it (regionscan build-jvm-source) and pass the new jar");
    }
  }

  @Override
  public String shortName() {
    return "regionscan";
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    checkVersion();
    SourceSettings settings = new SourceSettings(options.asCaseSensitiveMap());
    String ddl = settings.call(settings.request("schema")).path("ddl").asText();
    return StructType.fromDDL(ddl);
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public BaseRelation createRelation(SQLContext sqlContext, SaveMode mode,
      scala.collection.immutable.Map<String, String> parameters, Dataset<Row> data) {
    checkVersion();
    Map<String, String> options = scala.jdk.javaapi.CollectionConverters.asJava(parameters);
    SourceSettings settings = new SourceSettings(options);
    com.fasterxml.jackson.databind.node.ObjectNode req = settings.request("save");
    req.put("mode", mode.name());
    com.fasterxml.jackson.databind.JsonNode decision = settings.call(req);
    if (decision.path("write").asBoolean(true)) {
      NativeWrite.run(data, settings, "overwrite".equals(decision.path("mode").asText()), decision);
    }
    StructType schema = data.schema();
    return new BaseRelation() {
      @Override
      public SQLContext sqlContext() {
        return sqlContext;
      }

      @Override
      public StructType schema() {
        return schema;
      }
    };
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    checkVersion();
    // The DataFrame's columns are its mapping: a row exists through a cell of one of them, as
    // for the Python source and the columns option (a narrower user schema drops the rows that
    // have none of its columns); a query reading fewer columns keeps every row of the DataFrame.
    Map<String, String> options = new java.util.HashMap<>(properties);
    String names = String.join(",", schema.fieldNames());
    if (!names.isEmpty() && java.util.Arrays.stream(schema.fieldNames()).noneMatch(n -> n.contains(","))) {
      options.keySet().removeIf(k -> k.equalsIgnoreCase("regionscan.columns"));  // wins over columns
      options.put("regionscan.columns", names);
    }
    return new RegionScanTable(new SourceSettings(options), schema);
  }
}
