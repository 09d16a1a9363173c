package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.GeneralScalarExpression;
import org.apache.spark.sql.connector.expressions.Literal;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.aggregate.Max;
import org.apache.spark.sql.connector.expressions.aggregate.Min;
import org.apache.spark.sql.connector.expressions.aggregate.Sum;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownLimit;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.SupportsPushDownV2Filters;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import java.util.ArrayList;
import java.util.List;

/**
 * One query's scan: required columns, V2 filters (translated by the worker with the same
 * code as the Python source's pushdown), a limit, and aggregates: COUNT (from the block
 * indexes) and MIN/MAX of the row key (from the first and last row keys) answered at planning
 * when nothing but key ranges restricts the rows; else COUNT, SUM, MIN and MAX, grouped by
 * plain columns or not, computed by each task over its rows (the worker says which it
 * computes), Spark aggregating the partial rows.
 */
final class RegionScanBuilder implements SupportsPushDownRequiredColumns, SupportsPushDownV2Filters,
    SupportsPushDownLimit, SupportsPushDownAggregates {
  private final SourceSettings settings;
  private final StructType full;
  private StructType required;
  private final ArrayNode filters = WorkerProcess.JSON.createArrayNode();
  private final List<Predicate> pushed = new ArrayList<>();
  private int limit = -1;
  private String scanned = "";  // the key ranges and engine filter the worker made of the filters, for explain()
  private JsonNode pushPlan;  // the push reply's plan of the scan for every column, or null
  private Aggregation aggregation;
  private Object[] aggregateValues;
  private DataType[] aggregateTypes;
  private boolean aggregateAsked;
  private ObjectNode taskAggregate;  // the aggregate each task computes (PROTOCOL.md, "read"), or null
  private StructType taskInputs;  // the columns a task reads for it (the worker's count reply)
  private StructType taskAggregateSchema;
  private String aggregateNote = "";  // why an aggregate of an expression is left to Spark, for explain()
  private final boolean keyGrouped;  // a catalog table's: the scan reports its tasks' key groups

  RegionScanBuilder(SourceSettings settings, StructType schema) {
    this(settings, schema, false);
  }

  RegionScanBuilder(SourceSettings settings, StructType schema, boolean keyGrouped) {
    this.settings = settings;
    this.full = schema;
    this.required = schema;
    this.keyGrouped = keyGrouped;
  }

  @Override
  public void pruneColumns(StructType requiredSchema) {
    // Top-level columns only: Spark may ask for part of a struct (col.a), but the worker
    // decodes whole columns, so each required field is read at its full type and Spark
    // projects the nested part itself.
    StructType top = new StructType();
    for (StructField f : requiredSchema.fields()) {
      top = top.add(full.apply(f.name()));
    }
    this.required = top;
  }

  @Override
  public Predicate[] pushPredicates(Predicate[] predicates) {
    List<Predicate> sent = new ArrayList<>();
    List<Predicate> kept = new ArrayList<>();
    ArrayNode json = WorkerProcess.JSON.createArrayNode();
    for (Predicate p : predicates) {
      ObjectNode f = Predicates.toJson(p);
      if (f == null) {
        kept.add(p);
      } else {
        sent.add(p);
        json.add(f);
      }
    }
    if (sent.isEmpty()) {
      return predicates;
    }
    ObjectNode req = settings.request("push");
    req.set("filters", json);
    // the scan is planned in the same request, for every column: the tasks narrow it to the
    // pruned columns, so no plan request follows (PROTOCOL.md, "push")
    ObjectNode plan = req.putObject("plan");
    plan.put("schema", full.json());
    RegionScanScan.packing(plan, keyGrouped);
    JsonNode reply = settings.call(req);
    pushPlan = reply.path("plan").isObject() ? reply.path("plan") : null;  // a worker that predates it sends none
    scanned = scannedText(reply);
    boolean[] handled = new boolean[sent.size()];
    for (JsonNode i : reply.path("handled")) {
      handled[i.asInt()] = true;
    }
    for (int i = 0; i < sent.size(); i++) {
      filters.add(json.get(i));  // every translated filter narrows the scan; Spark re-checks the unhandled
      if (handled[i]) {
        pushed.add(sent.get(i));
      } else {
        kept.add(sent.get(i));
      }
    }
    return kept.toArray(new Predicate[0]);
  }

  @Override
  public Predicate[] pushedPredicates() {
    return pushed.toArray(new Predicate[0]);
  }

  @Override
  public boolean pushLimit(int n) {
    limit = n;
    return true;
  }

  @Override
  public boolean isPartiallyPushed() {
    return true;  // each task stops after n rows; Spark applies the limit over all of them
  }

  /** The one top-level column a V2 expression names, or null. */
  private static String column(Expression e) {
    if (!(e instanceof NamedReference)) {
      return null;
    }
    String[] names = ((NamedReference) e).fieldNames();
    return names.length == 1 ? names[0] : null;
  }

  /**
   * A GROUP BY expression added to {@code groups} as the worker takes it: a column, or
   * {@code col % k} of an integer column by a positive literal of its type (Spark translates
   * {@code %} in ANSI mode only, where it is Java's remainder). Its type, or null for any other.
   */
  private DataType groupBy(Expression e, ArrayNode groups) {
    String name = column(e);
    if (name != null) {
      if (!full.getFieldIndex(name).isDefined()) {
        return null;
      }
      groups.add(name);
      return full.apply(name).dataType();
    }
    if (!(e instanceof GeneralScalarExpression) || !"%".equals(((GeneralScalarExpression) e).name())) {
      return null;
    }
    Expression[] args = e.children();
    name = args.length == 2 ? column(args[0]) : null;
    if (name == null || !full.getFieldIndex(name).isDefined() || !(args[1] instanceof Literal)) {
      return null;
    }
    DataType type = full.apply(name).dataType();
    Literal<?> k = (Literal<?>) args[1];
    boolean integral = type instanceof IntegerType || type instanceof LongType || type instanceof ShortType
        || type instanceof ByteType;
    if (!integral || !k.dataType().equals(type) || !(k.value() instanceof Number)
        || ((Number) k.value()).longValue() < 1) {
      return null;
    }
    ObjectNode g = groups.addObject();
    g.put("column", name);
    g.put("mod", ((Number) k.value()).longValue());
    return type;
  }

  /** The aggregate of {@code f} as a worker request entry (PROTOCOL.md, "count"), or null when none is sent. */
  private ObjectNode aggregateJson(AggregateFunc f, ArrayNode into) {
    String name = null;
    String fn;
    Expression argument = null;  // a SUM's or COUNT's argument when it is not a plain column
    if (f instanceof CountStar) {
      fn = "count_star";
    } else if (f instanceof Count && !((Count) f).isDistinct()) {
      fn = "count";
      argument = ((Count) f).column();
    } else if (f instanceof Sum && !((Sum) f).isDistinct()) {
      fn = "sum";
      argument = ((Sum) f).column();
    } else if (f instanceof Min || f instanceof Max) {
      fn = f instanceof Min ? "min" : "max";
      name = column(f instanceof Min ? ((Min) f).column() : ((Max) f).column());
    } else {
      return null;
    }
    ObjectNode expr = null;
    if (argument != null) {
      name = column(argument);
      // arithmetic (SUM(l_extendedprice * (1 - l_discount))): the worker types and evaluates it
      expr = name == null ? AggregateExpressions.toJson(argument, full) : null;
      if (name == null && expr == null) {
        return null;
      }
    }
    if (!"count_star".equals(fn) && expr == null && (name == null || !full.getFieldIndex(name).isDefined())) {
      return null;
    }
    ObjectNode a = into.addObject();
    a.put("fn", fn);
    if (name != null) {
      a.put("column", name);
    }
    if (expr != null) {
      a.set("expr", expr);
    }
    return a;
  }

  /**
   * Asks the worker about {@code agg} once: its values when answered at planning (then
   * {@link #aggregateValues}), else whether each task can compute it ({@link #taskAggregate}).
   */
  private void ask(Aggregation agg) {
    if (aggregateAsked && agg.equals(aggregation)) {
      return;
    }
    aggregateAsked = true;
    aggregation = agg;
    aggregateValues = null;
    taskAggregate = null;
    taskInputs = null;
    aggregateNote = "";
    AggregateFunc[] funcs = agg.aggregateExpressions();
    ArrayNode aggs = WorkerProcess.JSON.createArrayNode();
    for (AggregateFunc f : funcs) {
      if (aggregateJson(f, aggs) == null) {
        return;
      }
    }
    ArrayNode groups = WorkerProcess.JSON.createArrayNode();
    List<DataType> groupTypes = new ArrayList<>();
    for (Expression e : agg.groupByExpressions()) {
      DataType type = groupBy(e, groups);
      if (type == null) {
        return;  // another GROUP BY expression: Spark computes it
      }
      groupTypes.add(type);
    }
    ObjectNode req = settings.request("count");
    req.set("filters", filters);
    req.set("aggregates", aggs);
    req.set("group_by", groups);
    // an expression's decimal type follows spark.sql.decimalOperations.allowPrecisionLoss
    req.put("decimal_precision_loss", SQLConf.get().decimalOperationsAllowPrecisionLoss());
    JsonNode reply = settings.call(req);
    if (groups.size() == 0) {
      aggregateValues = planned(funcs, reply.path("values"));
    }
    String key = reply.path("key_column").asText("");
    boolean byKey = false;
    for (JsonNode g : groups) {
      byKey |= g.isTextual() && g.asText().equalsIgnoreCase(key);
    }
    // a catalog table's scan may report key-grouped tasks, and Spark then groups by the key
    // without a shuffle: better than partial rows shuffled by it
    JsonNode why = reply.path("not_per_task");
    aggregateNote = why.isTextual() ? ", AggregateNotPushed: " + why.asText() : "";
    StructType inputs = aggregateValues == null ? taskInputs(reply.path("task_inputs")) : null;
    if (inputs != null && reply.path("per_task").asBoolean(false) && !(keyGrouped && byKey)) {
      taskInputs = inputs;
      taskAggregate = WorkerProcess.JSON.createObjectNode();
      taskAggregate.set("group_by", groups);
      taskAggregate.set("aggregates", aggs);
      // a BIGINT SUM under ANSI mode fails where a running sum overflows, as Spark's own does
      taskAggregate.put("ansi", SQLConf.get().ansiEnabled());
      taskAggregate.put("decimal_precision_loss", SQLConf.get().decimalOperationsAllowPrecisionLoss());
      taskAggregateSchema = partialSchema(funcs, groups, groupTypes, reply.path("partial_types"));
    }
  }

  /** The values answered at planning as Spark's internal values, or null. */
  private Object[] planned(AggregateFunc[] funcs, JsonNode values) {
    if (!values.isArray() || values.size() != funcs.length) {
      return null;
    }
    DataType[] types = new DataType[funcs.length];
    Object[] out = new Object[funcs.length];
    for (int i = 0; i < funcs.length; i++) {
      types[i] = DataTypes.LongType;
      JsonNode v = values.get(i);
      if (funcs[i] instanceof Min || funcs[i] instanceof Max) {
        String name = column(funcs[i] instanceof Min ? ((Min) funcs[i]).column() : ((Max) funcs[i]).column());
        types[i] = full.apply(name).dataType();
        if (!EdgeValues.supported(types[i]) || !v.isObject()) {
          return null;
        }
        out[i] = EdgeValues.toSpark(v, types[i]);
      } else if (v.isNumber()) {
        out[i] = v.asLong();
      } else {
        return null;
      }
    }
    aggregateTypes = types;
    return out;
  }

  /**
   * What each task returns for a partial aggregate: the GROUP BY columns, then per aggregate a
   * BIGINT for COUNT and an integer SUM (Spark sums integer partials as BIGINT), the column's
   * type for MIN/MAX and for a DECIMAL SUM: Spark sums the partial rows of a decimal SUM with
   * the column's type as the input, so the result keeps SUM's type (DECIMAL(p+10, s)); a task
   * whose sum does not fit the column's type sends it as several rows (PROTOCOL.md, "read").
   */
  private StructType partialSchema(AggregateFunc[] funcs, ArrayNode groups, List<DataType> groupTypes,
      JsonNode partialTypes) {
    StructType schema = new StructType();
    for (int i = 0; i < groups.size(); i++) {
      schema = schema.add("group" + i, groupTypes.get(i), true);
    }
    for (int i = 0; i < funcs.length; i++) {
      AggregateFunc f = funcs[i];
      boolean count = f instanceof CountStar || f instanceof Count;
      DataType type = DataTypes.LongType;
      if (f instanceof Min || f instanceof Max) {
        type = full.apply(column(f instanceof Min ? ((Min) f).column() : ((Max) f).column())).dataType();
      } else if (f instanceof Sum && column(((Sum) f).column()) == null) {
        // a SUM of arithmetic: the expression's type as the worker derived it by Spark's rules,
        // which Spark's final SUM casts the partial column to (DECIMAL), or BIGINT
        type = DataType.fromDDL(partialTypes.path(i).asText("bigint"));
      } else if (f instanceof Sum && full.apply(column(((Sum) f).column())).dataType() instanceof DecimalType) {
        type = full.apply(column(((Sum) f).column())).dataType();
      }
      schema = schema.add("agg" + i + "_" + f.toString(), type, !count);
    }
    return schema;
  }

  /**
   * The columns a task reads for its partial aggregate, as the worker names them in its count
   * reply (the groups, then the aggregated columns; none for a bare COUNT(*)); null when the
   * reply has no list (a worker that predates {@code task_inputs}) or names a column this table
   * lacks: Spark then aggregates.
   */
  private StructType taskInputs(JsonNode names) {
    if (!names.isArray()) {
      return null;
    }
    StructType inputs = new StructType();
    for (JsonNode name : names) {
      if (!name.isTextual() || !full.getFieldIndex(name.asText()).isDefined()) {
        return null;
      }
      inputs = inputs.add(full.apply(name.asText()));
    }
    return inputs;
  }

  @Override
  public boolean supportCompletePushDown(Aggregation agg) {
    ask(agg);
    return aggregateValues != null;
  }

  @Override
  public boolean pushAggregation(Aggregation agg) {
    ask(agg);
    return aggregateValues != null || taskAggregate != null;
  }

  @Override
  public Scan build() {
    if (aggregateValues == null && taskAggregate != null) {
      // the tasks aggregate their rows: no limit applies below an aggregate, nor key grouping
      return new RegionScanScan(settings, taskInputs, filters, describe(pushed) + scanned, -1, false,
          taskAggregate, taskAggregateSchema, describeAggregation(aggregation), null);
    }
    if (aggregateValues != null) {
      StructType schema = new StructType();
      AggregateFunc[] funcs = aggregation.aggregateExpressions();
      for (int i = 0; i < funcs.length; i++) {
        // COUNT is never null; MIN/MAX of no rows is
        schema = schema.add("agg" + i + "_" + funcs[i].toString(), aggregateTypes[i], aggregateValues[i] == null);
      }
      return new CountScan(settings, schema, aggregateValues, describe(pushed), aggregation.toString());
    }
    return new RegionScanScan(settings, required, filters, describe(pushed) + scanned + aggregateNote, limit, keyGrouped,
        pushPlan);
  }

  /**
   * {@code , KeyRanges: [[a, b), ...], EngineFilter: ..., DecodedFilters: [...]} from a push reply
   * (nothing when unrestricted); decoded filters are those the worker evaluates on decoded rows.
   */
  static String scannedText(JsonNode reply) {
    StringBuilder sb = new StringBuilder();
    JsonNode ranges = reply.path("key_ranges");
    if (ranges.isArray()) {
      List<String> parts = new ArrayList<>();
      for (JsonNode r : ranges) {
        JsonNode hi = r.get(1);
        parts.add("[" + r.get(0).asText() + ", " + (hi == null || hi.isNull() ? "(open)" : hi.asText()) + ")");
      }
      sb.append(", KeyRanges: ").append(parts.size()).append(" [").append(String.join(", ", parts)).append("]");
    }
    JsonNode engine = reply.path("engine_filter");
    if (engine.isTextual()) {
      sb.append(", EngineFilter: ").append(engine.asText());
    }
    JsonNode decoded = reply.path("decoded");
    if (decoded.isArray() && decoded.size() > 0) {
      List<String> parts = new ArrayList<>();
      for (JsonNode d : decoded) {
        parts.add(d.asText());
      }
      sb.append(", DecodedFilters: [").append(String.join(", ", parts)).append("]");
    }
    return sb.toString();
  }

  /** {@code [SUM(n), COUNT(*)], PushedGroupBy: [g]} as Spark's file scans name a pushed aggregation. */
  static String describeAggregation(Aggregation agg) {
    List<String> funcs = new ArrayList<>();
    for (AggregateFunc f : agg.aggregateExpressions()) {
      funcs.add(f.toString());
    }
    return "[" + String.join(", ", funcs) + "], PushedGroupBy: [" + String.join(", ", columns(agg.groupByExpressions())) + "]";
  }

  static String describe(List<Predicate> predicates) {
    List<String> out = new ArrayList<>();
    for (Predicate p : predicates) {
      out.add(p.toString());
    }
    return "[" + String.join(", ", out) + "]";
  }

  static String[] columns(Expression[] exprs) {
    String[] out = new String[exprs.length];
    for (int i = 0; i < exprs.length; i++) {
      out[i] = exprs[i].toString();
    }
    return out;
  }
}
