package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.aggregate.Max;
import org.apache.spark.sql.connector.expressions.aggregate.Min;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownLimit;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.SupportsPushDownV2Filters;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import java.util.ArrayList;
import java.util.List;

/**
 * One query's scan: required columns, V2 filters (translated by the worker with the same
 * code as the Python source's pushdown), a limit, and COUNT aggregates (from the block
 * indexes) and MIN/MAX of the row key (from the first and last row keys) answered at planning
 * when nothing but key ranges restricts the rows.
 */
final class RegionScanBuilder implements SupportsPushDownRequiredColumns, SupportsPushDownV2Filters,
    SupportsPushDownLimit, SupportsPushDownAggregates {
  private final SourceSettings settings;
  private final StructType full;
  private StructType required;
  private final ArrayNode filters = EngineWorker.JSON.createArrayNode();
  private final List<Predicate> pushed = new ArrayList<>();
  private int limit = -1;
  private String scanned = "";  // the key ranges and engine filter the worker made of the filters, for explain()
  private Aggregation aggregation;
  private Object[] aggregateValues;
  private DataType[] aggregateTypes;
  private boolean aggregateAsked;
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
    ArrayNode json = EngineWorker.JSON.createArrayNode();
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
    JsonNode reply = settings.call(req);
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

  private Object[] answer(Aggregation agg) {
    if (aggregateAsked && agg.equals(aggregation)) {
      return aggregateValues;
    }
    aggregateAsked = true;
    aggregation = agg;
    aggregateValues = null;
    if (agg.groupByExpressions().length > 0) {
      return null;
    }
    AggregateFunc[] funcs = agg.aggregateExpressions();
    DataType[] types = new DataType[funcs.length];
    ArrayNode aggs = EngineWorker.JSON.createArrayNode();
    for (int i = 0; i < funcs.length; i++) {
      AggregateFunc f = funcs[i];
      ObjectNode a = aggs.addObject();
      types[i] = DataTypes.LongType;
      if (f instanceof CountStar) {
        a.put("fn", "count_star");
      } else if (f instanceof Count && !((Count) f).isDistinct() && column(((Count) f).column()) != null) {
        a.put("fn", "count");
        a.put("column", column(((Count) f).column()));
      } else if ((f instanceof Min || f instanceof Max)) {
        String name = column(f instanceof Min ? ((Min) f).column() : ((Max) f).column());
        if (name == null || !full.getFieldIndex(name).isDefined()
            || !EdgeValues.supported(full.apply(name).dataType())) {
          return null;
        }
        a.put("fn", f instanceof Min ? "min" : "max");
        a.put("column", name);
        types[i] = full.apply(name).dataType();
      } else {
        return null;
      }
    }
    ObjectNode req = settings.request("count");
    req.set("filters", filters);
    req.set("aggregates", aggs);
    JsonNode reply = settings.call(req);
    JsonNode values = reply.path("values");
    if (!values.isArray() || values.size() != funcs.length) {
      return null;
    }
    Object[] out = new Object[funcs.length];
    for (int i = 0; i < out.length; i++) {
      JsonNode v = values.get(i);
      out[i] = v.isObject() ? EdgeValues.toSpark(v, types[i]) : (Object) v.asLong();
    }
    aggregateTypes = types;
    aggregateValues = out;
    return out;
  }

  @Override
  public boolean supportCompletePushDown(Aggregation agg) {
    return answer(agg) != null;
  }

  @Override
  public boolean pushAggregation(Aggregation agg) {
    return answer(agg) != null;
  }

  @Override
  public Scan build() {
    if (aggregateValues != null) {
      StructType schema = new StructType();
      AggregateFunc[] funcs = aggregation.aggregateExpressions();
      for (int i = 0; i < funcs.length; i++) {
        // COUNT is never null; MIN/MAX of no rows is
        schema = schema.add("agg" + i + "_" + funcs[i].toString(), aggregateTypes[i], aggregateValues[i] == null);
      }
      return new CountScan(settings, schema, aggregateValues, describe(pushed), aggregation.toString());
    }
    return new RegionScanScan(settings, required, filters, describe(pushed) + scanned, limit, keyGrouped);
  }

  /** {@code , KeyRanges: [[a, b), ...], EngineFilter: ...} from a push reply (nothing when unrestricted). */
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
    return sb.toString();
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
