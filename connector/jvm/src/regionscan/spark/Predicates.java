package regionscan.spark;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.Literal;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;

import java.util.Base64;
import java.util.Map;

/**
 * Spark V2 predicates in the worker's small JSON form (connector/jvm/PROTOCOL.md, "filters").
 *
 * Comparisons of one column with literals, IN, IS [NOT] NULL, the three string tests, NOT of
 * those, and AND / OR trees of them are expressed; anything else (expressions) gives null and
 * stays with Spark. Inside a tree an untranslatable child becomes {@code Opaque} (the worker
 * takes it as "any row may pass"), so the tree still narrows the scan and Spark re-checks it.
 * The worker does the range algebra (connector/disjunction.py); nothing here computes ranges.
 */
final class Predicates {
  private static final JsonNodeFactory F = JsonNodeFactory.instance;
  private static final Map<String, String> FLIPPED = Map.of(
      "=", "=", "<=>", "<=>", ">", "<", ">=", "<=", "<", ">", "<=", ">=");
  private static final Map<String, String> OPS = Map.ofEntries(
      Map.entry("=", "EqualTo"), Map.entry("<=>", "EqualNullSafe"), Map.entry(">", "GreaterThan"),
      Map.entry(">=", "GreaterThanOrEqual"), Map.entry("<", "LessThan"), Map.entry("<=", "LessThanOrEqual"),
      Map.entry("STARTS_WITH", "StringStartsWith"), Map.entry("ENDS_WITH", "StringEndsWith"),
      Map.entry("CONTAINS", "StringContains"));

  private Predicates() {}

  /** The JSON form of {@code p}, or null when it has none. */
  static ObjectNode toJson(Predicate p) {
    String name = p.name();
    Expression[] c = p.children();
    ObjectNode out = F.objectNode();
    switch (name) {
      case "AND":
      case "OR": {
        ArrayNode children = F.arrayNode();
        boolean any = false;
        for (Expression e : c) {
          ObjectNode child = e instanceof Predicate ? toJson((Predicate) e) : null;
          if (child == null) {
            child = F.objectNode();
            child.put("op", "Opaque");
            child.put("text", e.toString());
          } else {
            any = true;
          }
          children.add(child);
        }
        if (!any || children.size() < 2) {
          return null;
        }
        out.put("op", name.equals("AND") ? "And" : "Or");
        out.set("children", children);
        return out;
      }
      case "NOT": {
        if (c.length != 1 || !(c[0] instanceof Predicate)) {
          return null;
        }
        ObjectNode child = toJson((Predicate) c[0]);
        if (child == null || child.has("children")) {
          return null;  // NOT of a tree stays with Spark (its optimizer pushes NOT inward anyway)
        }
        out.put("op", "Not");
        out.set("child", child);
        return out;
      }
      case "IS_NULL":
      case "IS_NOT_NULL": {
        String col = column(c.length == 1 ? c[0] : null);
        if (col == null) {
          return null;
        }
        out.put("op", name.equals("IS_NULL") ? "IsNull" : "IsNotNull");
        out.put("column", col);
        return out;
      }
      case "IN": {
        String col = column(c.length >= 1 ? c[0] : null);
        if (col == null) {
          return null;
        }
        ArrayNode values = F.arrayNode();
        for (int i = 1; i < c.length; i++) {
          ObjectNode v = literal(c[i]);
          if (v == null) {
            return null;
          }
          values.add(v);
        }
        out.put("op", "In");
        out.put("column", col);
        out.set("values", values);
        return out;
      }
      default:
        break;
    }
    String op = OPS.get(name);
    if (op == null || c.length != 2) {
      return null;
    }
    String col = column(c[0]);
    ObjectNode value = literal(c[1]);
    if (col == null && FLIPPED.containsKey(name)) {
      col = column(c[1]);
      value = literal(c[0]);
      op = OPS.get(FLIPPED.get(name));
    }
    if (col == null || value == null) {
      return null;
    }
    out.put("op", op);
    out.put("column", col);
    out.set("value", value);
    return out;
  }

  private static String column(Expression e) {
    if (e instanceof NamedReference) {
      String[] names = ((NamedReference) e).fieldNames();
      return names.length == 1 ? names[0] : null;
    }
    return null;
  }

  private static ObjectNode literal(Expression e) {
    if (!(e instanceof Literal)) {
      return null;
    }
    Literal<?> lit = (Literal<?>) e;
    Object v = lit.value();
    DataType t = lit.dataType();
    ObjectNode out = F.objectNode();
    if (v == null) {
      out.put("t", "null");
      return out;
    }
    if (t instanceof IntegerType || t instanceof LongType || t instanceof ShortType || t instanceof ByteType) {
      out.put("t", "int");
      out.put("v", ((Number) v).longValue());
    } else if (t instanceof DoubleType || t instanceof FloatType) {
      double d = ((Number) v).doubleValue();
      if (Double.isNaN(d) || Double.isInfinite(d)) {
        return null;
      }
      out.put("t", "float");
      out.put("v", d);
    } else if (t instanceof BooleanType) {
      out.put("t", "bool");
      out.put("v", (Boolean) v);
    } else if (t instanceof StringType) {
      out.put("t", "string");
      out.put("v", v.toString());
    } else if (t instanceof TimestampType) {
      out.put("t", "timestamp");  // microseconds since the epoch, an instant
      out.put("v", ((Number) v).longValue());
    } else if (t instanceof TimestampNTZType) {
      out.put("t", "timestamp_ntz");  // microseconds since the epoch, a wall clock
      out.put("v", ((Number) v).longValue());
    } else if (t instanceof DateType) {
      out.put("t", "date");
      out.put("v", ((Number) v).intValue());
    } else if (t instanceof DecimalType) {
      out.put("t", "decimal");
      out.put("v", ((Decimal) v).toJavaBigDecimal().toPlainString());
    } else if (t instanceof BinaryType) {
      out.put("t", "binary");
      out.put("v", Base64.getEncoder().encodeToString((byte[]) v));
    } else {
      return null;
    }
    return out;
  }
}
