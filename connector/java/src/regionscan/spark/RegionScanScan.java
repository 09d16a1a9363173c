package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.Expressions;
import org.apache.spark.sql.connector.expressions.FieldReference;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.SupportsReportPartitioning;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.connector.read.SupportsRuntimeV2Filtering;
import org.apache.spark.sql.connector.read.partitioning.KeyGroupedPartitioning;
import org.apache.spark.sql.connector.read.partitioning.Partitioning;
import org.apache.spark.sql.connector.read.partitioning.UnknownPartitioning;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;

/**
 * A planned read (of rows, or of each task's partial aggregates): the worker plans the splits (one per region, pinned) and packs them into
 * tasks by size, as Spark packs files ({@code spark.sql.files.maxPartitionBytes}, the open cost).
 *
 * A catalog table's scan ({@code keyGrouped}) reports its tasks as key-grouped partitioning:
 * transform {@code regionscan_tasks_<digest>(key)} ({@link TaskIndexFunction}, resolved by
 * {@link RegionScanCatalog}), each task's partition value its index. Only when the worker names
 * the key's stored form ({@code key_encoding}) and the key column is read at that type; else,
 * and for {@code format("regionscan")} reads (no function catalog), nothing is reported.
 *
 * Runtime filters ({@link SupportsRuntimeV2Filtering}): Spark may hand the scan, after planning
 * and before its tasks are made, predicates built from the other side of a join (dynamic
 * pruning: an IN list of the join keys). They join the pushed filters in a new plan request, so
 * the worker drops the regions their key ranges exclude and skips the blocks whose min/max
 * exclude them; Spark's join still checks every row, so they only narrow what is read. Not
 * offered by a scan whose tasks aggregate, that has a limit pushed, or of a catalog table (one
 * that may report key-grouped partitioning: a new plan would pack other tasks than the ones
 * reported), nor with {@code regionscan.scan.runtimefilter=false}.
 */
final class RegionScanScan implements Scan, Batch, SupportsReportStatistics, SupportsReportPartitioning,
    SupportsRuntimeV2Filtering {
  static final String RUNTIME_FILTER = "regionscan.scan.runtimefilter";
  private final SourceSettings settings;
  private final StructType required;
  private ArrayNode filters;  // the pushed filters, then the runtime filters Spark adds
  private final List<String> runtimeFilters = new ArrayList<>();  // as explain shows them
  private final String pushedFilters;
  private final int limit;
  private final boolean keyGrouped;
  private final ObjectNode aggregate;  // what each task aggregates (PROTOCOL.md, "read"), or null
  private final StructType output;  // what the tasks return: the rows' columns, or the partial aggregates
  private final String aggregation;
  private JsonNode plan;
  private final JsonNode pushPlan;  // the push reply's plan of every mapped column, or null
  private boolean narrowed;  // plan is pushPlan: each task's read names its columns
  private TaskIndexFunction grouping;
  private boolean groupingAsked;
  private Long rowCount;

  RegionScanScan(SourceSettings settings, StructType required, ArrayNode filters, String pushedFilters, int limit,
      boolean keyGrouped, JsonNode pushPlan) {
    this(settings, required, filters, pushedFilters, limit, keyGrouped, null, required, null, pushPlan);
  }

  /**
   * A scan whose tasks aggregate their rows ({@code aggregate}), returning {@code output};
   * {@code pushPlan}: the plan the push request made for every mapped column, or null.
   */
  RegionScanScan(SourceSettings settings, StructType required, ArrayNode filters, String pushedFilters, int limit,
      boolean keyGrouped, ObjectNode aggregate, StructType output, String aggregation, JsonNode pushPlan) {
    this.settings = settings;
    this.pushPlan = pushPlan;
    this.required = required;
    this.filters = filters;
    this.pushedFilters = pushedFilters;
    this.limit = limit;
    this.keyGrouped = keyGrouped;
    this.aggregate = aggregate;
    this.output = output;
    this.aggregation = aggregation;
  }

  private ObjectNode request(String op) {
    ObjectNode req = settings.request(op);
    ArrayNode cols = req.putArray("columns");
    for (String name : required.fieldNames()) {
      cols.add(name);
    }
    req.set("filters", filters);
    req.put("schema", output.json());
    if (aggregate != null) {
      req.set("aggregate", aggregate);
    }
    if (limit >= 0) {
      req.put("limit", limit);
    }
    return req;
  }

  /** How Spark packs the read into tasks (PROTOCOL.md, "plan"), put in a {@code plan} request or a push's {@code plan}. */
  static void packing(ObjectNode req, boolean keyGrouped) {
    SQLConf conf = SQLConf.get();
    req.put("max_partition_bytes", conf.filesMaxPartitionBytes());
    req.put("open_cost", conf.filesOpenCostInBytes());
    if (keyGrouped) {
      req.put("task_ranges", true);
    }
    String key = "spark.sql.leafNodeDefaultParallelism";
    req.put("parallelism", conf.contains(key) ? Integer.parseInt(conf.getConfString(key))
        : SparkContext.getOrCreate().defaultParallelism());
  }

  /**
   * Whether the plan the push made for every mapped column serves this scan: its tasks read it
   * narrowed to the required columns. Not for a scan whose tasks aggregate (their output is the
   * partial rows), nor one that needs key columns alone when its filters test nothing but the
   * key (the worker scans the key alone then); when they test other columns, such a read scans
   * every mapped column anyway and the worker says so ({@code key_reads_narrow}).
   */
  private boolean narrowable() {
    if (pushPlan == null || aggregate != null || !pushPlan.path("read_plan").isTextual()) {
      return false;
    }
    java.util.Set<String> keys = new java.util.HashSet<>();
    for (JsonNode k : pushPlan.path("key_columns")) {
      keys.add(k.asText().toLowerCase(java.util.Locale.ROOT));
    }
    for (String name : required.fieldNames()) {
      if (!keys.contains(name.toLowerCase(java.util.Locale.ROOT))) {
        return true;
      }
    }
    return pushPlan.path("key_reads_narrow").asBoolean(false);  // a worker that predates it sends none
  }

  private synchronized JsonNode plan() {
    if (plan == null) {
      long started = System.nanoTime();
      narrowed = runtimeFilters.isEmpty() && narrowable();  // the push's plan knows no runtime filter
      if (narrowed) {
        plan = pushPlan;  // planned by the push request: no request now
      } else {
        ObjectNode req = request("plan");
        packing(req, keyGrouped);
        plan = settings.call(req);
      }
      String timeline = ReadTimeline.target();
      if (timeline != null) {
        ReadTimeline.write(timeline, String.format(java.util.Locale.ROOT, "{\"kind\":\"plan\",\"start_ms\":%d,\"plan_ms\":%.2f,"
            + "\"tasks\":%d,\"splits\":%d,\"table\":\"%s\",\"with_push\":%b}", System.currentTimeMillis(),
            (System.nanoTime() - started) / 1e6, plan.path("tasks").size(), plan.path("splits").asInt(),
            settings.tableName().replace("\"", "'"), narrowed));
      }
    }
    return plan;
  }

  @Override
  public StructType readSchema() {
    return output;
  }

  @Override
  public String description() {
    StringBuilder sb = new StringBuilder(settings.tableName());
    if (aggregation != null) {
      sb.append(" PushedAggregation: ").append(aggregation).append(" (partial, per task),");
    }
    sb.append(" PushedFilters: ").append(pushedFilters);
    if (limit >= 0) {
      sb.append(", PushedLimit: ").append(limit);
    }
    sb.append(", ReadSchema: ").append(required.simpleString());
    synchronized (this) {
      if (!runtimeFilters.isEmpty()) {
        sb.append(", RuntimeFilters: [").append(String.join(", ", runtimeFilters)).append("]");
      }
    }
    return sb.toString();
  }

  /** Whether Spark may hand this scan runtime filters (the class comment says when not). */
  private boolean runtimeFilterable() {
    String on = settings.options.get(RUNTIME_FILTER);
    if (on != null && !on.trim().equalsIgnoreCase("true") && !on.trim().equalsIgnoreCase("false")) {
      throw new IllegalArgumentException(RUNTIME_FILTER + " must be true or false, got '" + on + "'");
    }
    return (on == null || on.trim().equalsIgnoreCase("true")) && aggregate == null && limit < 0 && !keyGrouped;
  }

  /**
   * The columns a runtime filter may test: every column read. The worker takes a filter on the
   * row key as key ranges and one on a mapped value as a block-skipping filter; one it cannot
   * use narrows nothing, which is still right (Spark's join checks the rows).
   */
  @Override
  public NamedReference[] filterAttributes() {
    if (!runtimeFilterable()) {
      return new NamedReference[0];
    }
    String[] names = required.fieldNames();
    NamedReference[] out = new NamedReference[names.length];
    for (int i = 0; i < names.length; i++) {
      out[i] = FieldReference.column(names[i]);  // one name as is: Expressions.column parses it as SQL
    }
    return out;
  }

  /**
   * Adds Spark's runtime filters to the scan's and drops the plan made without them: the next
   * {@link #planInputPartitions()} asks the worker for a plan of the narrowed read. A predicate
   * with no JSON form is left out (it would narrow nothing the join does not already check).
   */
  @Override
  public synchronized void filter(Predicate[] predicates) {
    if (!runtimeFilterable()) {
      return;
    }
    ArrayNode narrowedFilters = filters.deepCopy();
    List<String> added = new ArrayList<>();
    for (Predicate p : predicates) {
      ObjectNode f = Predicates.toJson(p);
      if (f != null) {
        narrowedFilters.add(f);
        added.add(describeRuntime(p));
      }
    }
    if (added.isEmpty()) {
      return;
    }
    filters = narrowedFilters;
    runtimeFilters.addAll(added);
    plan = null;
    rowCount = null;
  }

  /** A runtime predicate for explain: an IN list as its column and value count, not its values. */
  private static String describeRuntime(Predicate p) {
    if ("IN".equals(p.name()) && p.children().length > 0) {
      return p.children()[0] + " IN (" + (p.children().length - 1) + " values)";
    }
    return p.toString();
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public InputPartition[] planInputPartitions() {
    JsonNode tasks = plan().path("tasks");
    JsonNode readPlan = plan().path("read_plan");
    ObjectNode read;
    if (readPlan.isTextual()) {
      // the driver's plan, made once by the worker: each task's read carries it and plans nothing
      read = WorkerProcess.JSON.createObjectNode();
      read.put("op", "read");
      read.put("read_plan", readPlan.asText());
      if (narrowed) {
        // the push's plan of every mapped column: the task reads the required ones
        ArrayNode cols = read.putArray("columns");
        for (String name : required.fieldNames()) {
          cols.add(name);
        }
        if (limit >= 0) {
          read.put("limit", limit);
        }
      }
    } else {
      read = request("read");  // a worker that predates read plans plans each task again
    }
    boolean keyed = grouping() != null;
    List<InputPartition> out = new ArrayList<>();
    for (JsonNode task : tasks) {
      read.set("splits", task.path("splits"));
      List<String> hosts = new ArrayList<>();
      for (JsonNode h : task.path("hosts")) {
        hosts.add(h.asText());
      }
      RegionScanPartition p = new RegionScanPartition(read.toString(), hosts.toArray(new String[0]));
      out.add(keyed ? new KeyedPartition(p, out.size()) : p);
    }
    return out.toArray(new InputPartition[0]);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new RegionScanReaderFactory(settings);
  }

  /** The transform the tasks are grouped by, or null when none is reported. */
  private synchronized TaskIndexFunction grouping() {
    if (!groupingAsked) {
      groupingAsked = true;
      grouping = keyGrouped ? layoutFunction(plan()) : null;
    }
    return grouping;
  }

  private TaskIndexFunction layoutFunction(JsonNode p) {
    String column = p.path("key_column").asText(null);
    String encoding = p.path("key_encoding").asText(null);
    JsonNode ranges = p.path("task_ranges");
    if (column == null || encoding == null || !ranges.isArray() || ranges.size() == 0
        || ranges.size() != p.path("tasks").size() || !required.getFieldIndex(column).isDefined()) {
      return null;
    }
    DataType type = required.apply(column).dataType();
    // exactly the type whose values the function maps (a collated STRING groups other values)
    DataType expected = "utf8".equals(encoding) ? DataTypes.StringType : DataTypes.BinaryType;
    if (!type.equals(expected)) {
      return null;
    }
    return TaskIndexFunction.of(encoding, p.path("key_null").isTextual() ? p.path("key_null").asText() : null, ranges);
  }

  @Override
  public Partitioning outputPartitioning() {
    TaskIndexFunction fn = grouping();
    if (fn == null) {
      return new UnknownPartitioning(0);
    }
    String column = plan().path("key_column").asText();
    return new KeyGroupedPartitioning(
        new Expression[] {Expressions.apply(fn.name(), FieldReference.column(column))}, plan().path("tasks").size());
  }

  /**
   * The rows this scan returns, from the block indexes' row counts (the worker's COUNT(*) at
   * planning), or -1 where they cannot tell: a filter the engine applies, a time range, a
   * limit, or a scan whose tasks aggregate.
   */
  private synchronized long rowCount() {
    if (rowCount == null) {
      rowCount = -1L;
      if (aggregate == null && limit < 0) {
        ObjectNode req = settings.request("count");
        req.set("filters", filters);
        req.putArray("aggregates").addObject().put("fn", "count_star");
        req.put("statistics", true);  // not the query's own aggregate: connector.explain keeps its plan
        JsonNode values = settings.call(req).path("values");
        if (values.isArray() && values.size() == 1 && values.get(0).isNumber()) {
          rowCount = values.get(0).asLong();
        }
      }
    }
    return rowCount;
  }

  @Override
  public Statistics estimateStatistics() {
    JsonNode p = plan();
    long size = p.path("size_bytes").asLong(0);
    SQLConf conf = SQLConf.get();
    // Spark reads a row count only with cost-based optimization (or plan statistics) on; else the
    // worker is not asked, and planning costs nothing more
    long rows = conf.cboEnabled() || conf.planStatsEnabled() ? rowCount() : -1;
    return new Statistics() {
      @Override
      public OptionalLong sizeInBytes() {
        return OptionalLong.of(size);
      }

      @Override
      public OptionalLong numRows() {
        return rows >= 0 ? OptionalLong.of(rows) : OptionalLong.empty();
      }
    };
  }
}
