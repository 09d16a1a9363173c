package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.catalyst.analysis.NamespaceAlreadyExistsException;
import org.apache.spark.sql.catalyst.analysis.NoSuchFunctionException;
import org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException;
import org.apache.spark.sql.connector.catalog.CatalogV2Util;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.FunctionCatalog;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.NamespaceChange;
import org.apache.spark.sql.connector.catalog.SupportsNamespaces;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A Spark catalog of the regionscan tables under one root:
 * {@code spark.sql.catalog.rs=regionscan.spark.RegionScanCatalog},
 * {@code spark.sql.catalog.rs.root=<path or URI>}.
 *
 * HBase namespaces are the catalog's namespaces ({@code rs.default.events} is table
 * {@code events}, {@code rs.ns1.events} is {@code ns1:events}); a table's columns come from
 * the mapping stored with it (connector/stored_mapping.py). Every other
 * {@code spark.sql.catalog.rs.*} option is passed to each table's reads as a source option.
 * Listing, loading, creating and dropping go to the engine worker's {@code catalog} op
 * (connector/worker/catalog.py); reads are {@code format("regionscan")}'s, and their scans
 * report their tasks as key-grouped partitioning over a function of this catalog
 * ({@link TaskIndexFunction}: one per scan layout, named {@code regionscan_tasks_<digest>}), so
 * a {@code GROUP BY} of the row key needs no shuffle.
 */
public final class RegionScanCatalog implements TableCatalog, SupportsNamespaces, FunctionCatalog {
  static final String DEFAULT_NAMESPACE = "default";
  private static final String[] MAPPING_PROPERTIES = {"hbase.columns.mapping", "catalog", "serde"};
  private String name;
  private Map<String, String> options;

  @Override
  public void initialize(String name, CaseInsensitiveStringMap options) {
    RegionScanProvider.checkVersion();
    this.name = name;
    this.options = new TreeMap<>(options.asCaseSensitiveMap());
    String root = this.options.get("root");
    if (root == null || root.isEmpty()) {
      throw new IllegalArgumentException("the regionscan catalog " + name + " needs its root: set spark.sql.catalog."
          + name + ".root to the tables' path or URI");
    }
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public String[] defaultNamespace() {
    return new String[] {DEFAULT_NAMESPACE};
  }

  // -- requests -----------------------------------------------------------

  private SourceSettings settings(Map<String, String> extra) {
    Map<String, String> opts = new TreeMap<>(options);
    opts.putAll(extra);
    return new SourceSettings(opts);
  }

  private JsonNode call(String action, Map<String, String> extra, ObjectNode fields) {
    SourceSettings settings = settings(extra);
    ObjectNode req = settings.request("catalog");
    req.put("action", action);
    if (fields != null) {
      req.setAll(fields);
    }
    return settings.call(req);
  }

  private static ObjectNode fields() {
    return WorkerProcess.JSON.createObjectNode();
  }

  /** The HBase name of a namespace: one level, as HBase has. */
  private static String namespaceName(String[] namespace) throws NoSuchNamespaceException {
    if (namespace.length == 0) {
      return DEFAULT_NAMESPACE;
    }
    if (namespace.length != 1) {
      throw new NoSuchNamespaceException(namespace);
    }
    return namespace[0];
  }

  /** The HBase name of a table: {@code t} in namespace default, else {@code ns:t}. */
  static String tableName(Identifier ident) throws NoSuchTableException {
    String[] ns = ident.namespace();
    if (ns.length > 1) {
      throw new NoSuchTableException(ident);
    }
    String space = ns.length == 0 ? DEFAULT_NAMESPACE : ns[0];
    return DEFAULT_NAMESPACE.equals(space) ? ident.name() : space + ":" + ident.name();
  }

  private static Map<String, String> table(String hbaseName) {
    Map<String, String> m = new HashMap<>();
    m.put("table", hbaseName);
    return m;
  }

  // -- tables ---------------------------------------------------------------

  @Override
  public Identifier[] listTables(String[] namespace) throws NoSuchNamespaceException {
    String ns = namespaceName(namespace);
    ObjectNode f = fields();
    f.put("namespace", ns);
    JsonNode reply = call("tables", Collections.emptyMap(), f);
    if (!reply.path("exists").asBoolean(false)) {
      throw new NoSuchNamespaceException(namespace);
    }
    List<Identifier> out = new ArrayList<>();
    for (JsonNode t : reply.path("tables")) {
      out.add(Identifier.of(new String[] {ns}, t.asText()));
    }
    return out.toArray(new Identifier[0]);
  }

  @Override
  public Table loadTable(Identifier ident) throws NoSuchTableException {
    String hbaseName = tableName(ident);
    JsonNode reply = call("table", table(hbaseName), null);
    if (!reply.path("exists").asBoolean(false)) {
      throw new NoSuchTableException(ident);
    }
    if (reply.path("ddl").isNull() || reply.path("ddl").isMissingNode()) {
      throw new IllegalArgumentException(reply.path("error").asText("table " + hbaseName + " has no stored mapping"));
    }
    Map<String, String> properties = new TreeMap<>();
    reply.path("mapping").fields().forEachRemaining(e -> properties.put(e.getKey(), e.getValue().asText()));
    properties.put("provider", "regionscan");
    return new CatalogTable(settings(table(hbaseName)), StructType.fromDDL(reply.path("ddl").asText()),
        hbaseName, properties);
  }

  @Override
  public boolean tableExists(Identifier ident) {
    try {
      return call("table", table(tableName(ident)), null).path("exists").asBoolean(false);
    } catch (NoSuchTableException e) {
      return false;
    }
  }

  @Override
  public Table createTable(Identifier ident, Column[] columns, Transform[] partitions, Map<String, String> properties)
      throws TableAlreadyExistsException, NoSuchNamespaceException {
    if (partitions.length > 0) {
      throw new IllegalArgumentException("regionscan tables are split into regions by row key, not partitioned: "
          + "drop PARTITIONED BY (TBLPROPERTIES ('regions' = 'n') pre-splits the table)");
    }
    String hbaseName;
    try {
      hbaseName = tableName(ident);
    } catch (NoSuchTableException e) {
      throw new NoSuchNamespaceException(ident.namespace());
    }
    if (tableExists(ident)) {
      throw new TableAlreadyExistsException(ident);
    }
    Map<String, String> extra = table(hbaseName);
    for (String key : MAPPING_PROPERTIES) {
      String value = property(properties, key);
      if (value != null) {
        extra.put(key, value);
      }
    }
    ObjectNode f = fields();
    StructType schema = CatalogV2Util.v2ColumnsToStructType(columns);
    if (schema.fields().length > 0) {
      f.put("schema", schema.json());
    }
    String regions = property(properties, "regions");
    if (regions != null) {
      try {
        f.put("regions", Integer.parseInt(regions.trim()));
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("TBLPROPERTIES regions must be a number of regions, got " + regions);
      }
    }
    call("create", extra, f);
    try {
      return loadTable(ident);
    } catch (NoSuchTableException e) {
      throw new IllegalStateException("table " + hbaseName + " was created but cannot be loaded", e);
    }
  }

  /** A CREATE TABLE property, as TBLPROPERTIES ({@code key}) or OPTIONS ({@code option.key}). */
  private static String property(Map<String, String> properties, String key) {
    String value = properties.get(key);
    return value != null ? value : properties.get("option." + key);
  }

  @Override
  public Table alterTable(Identifier ident, TableChange... changes) {
    throw new UnsupportedOperationException("ALTER TABLE is not supported by the regionscan catalog: change a table's "
        + "mapping with regionscan mapping set <table> --root <root> --mapping '...'");
  }

  @Override
  public boolean dropTable(Identifier ident) {
    String hbaseName;
    try {
      hbaseName = tableName(ident);
    } catch (NoSuchTableException e) {
      return false;
    }
    return call("drop", table(hbaseName), null).path("dropped").asBoolean(false);
  }

  @Override
  public void renameTable(Identifier oldIdent, Identifier newIdent) {
    throw new UnsupportedOperationException("RENAME is not supported by the regionscan catalog (HBase renames "
        + "through snapshots; copy the table with regionscan copy_table)");
  }

  // -- namespaces -------------------------------------------------------------

  @Override
  public String[][] listNamespaces() {
    JsonNode reply = call("namespaces", Collections.emptyMap(), null);
    List<String[]> out = new ArrayList<>();
    for (JsonNode ns : reply.path("namespaces")) {
      out.add(new String[] {ns.asText()});
    }
    return out.toArray(new String[0][]);
  }

  @Override
  public String[][] listNamespaces(String[] namespace) throws NoSuchNamespaceException {
    if (namespace.length == 0) {
      return listNamespaces();
    }
    loadNamespaceMetadata(namespace);
    return new String[0][];  // HBase namespaces do not nest
  }

  @Override
  public Map<String, String> loadNamespaceMetadata(String[] namespace) throws NoSuchNamespaceException {
    String ns = namespaceName(namespace);
    for (String[] known : listNamespaces()) {
      if (known[0].equals(ns)) {
        return new HashMap<>();
      }
    }
    throw new NoSuchNamespaceException(namespace);
  }

  @Override
  public void createNamespace(String[] namespace, Map<String, String> metadata) throws NamespaceAlreadyExistsException {
    if (namespace.length != 1) {
      throw new IllegalArgumentException("HBase namespaces have one level, not " + String.join(".", namespace));
    }
    if (namespaceExists(namespace)) {
      throw new NamespaceAlreadyExistsException(namespace);
    }
    ObjectNode f = fields();
    f.put("namespace", namespace[0]);
    call("create_namespace", Collections.emptyMap(), f);
  }

  @Override
  public void alterNamespace(String[] namespace, NamespaceChange... changes) {
    throw new UnsupportedOperationException("ALTER NAMESPACE is not supported by the regionscan catalog");
  }

  @Override
  public boolean dropNamespace(String[] namespace, boolean cascade) throws NoSuchNamespaceException {
    String ns = namespaceName(namespace);
    if (DEFAULT_NAMESPACE.equals(ns)) {
      throw new IllegalArgumentException("the default namespace cannot be dropped");
    }
    ObjectNode f = fields();
    f.put("namespace", ns);
    f.put("cascade", cascade);
    return call("drop_namespace", Collections.emptyMap(), f).path("dropped").asBoolean(false);
  }

  // -- functions: the scans' partition transforms ------------------------------

  @Override
  public Identifier[] listFunctions(String[] namespace) throws NoSuchNamespaceException {
    if (namespace.length != 0) {
      namespaceName(namespace);
      return new Identifier[0];
    }
    List<Identifier> out = new ArrayList<>();
    for (String fn : TaskIndexFunction.knownNames()) {
      out.add(Identifier.of(new String[0], fn));
    }
    return out.toArray(new Identifier[0]);
  }

  @Override
  public UnboundFunction loadFunction(Identifier ident) throws NoSuchFunctionException {
    TaskIndexFunction fn = ident.namespace().length == 0 ? TaskIndexFunction.known(ident.name()) : null;
    if (fn == null) {
      throw new NoSuchFunctionException(ident);
    }
    return fn;
  }
}
