package regionscan.spark;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.expressions.Cast;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.GeneralScalarExpression;
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
import java.util.Set;

/**
 * Spark V2 predicates in the worker's small JSON form (connector/java/PROTOCOL.md, "filters").
 *
 * Comparisons of one column with literals, IN, IS [NOT] NULL, the three string tests, NOT of
 * those, and AND / OR trees of them are expressed; so are comparisons of columns, literals and
 * {@code col % k} by a non-zero integer literal ({@code Compare}, which the worker evaluates on
 * decoded rows: connector/decoded_filters.py), through widening casts between integer types.
 * Anything else (other expressions, other casts) gives
 * null and stays with Spark. Inside a tree an untranslatable child becomes {@code Opaque} (the worker
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
  private static final Set<String> COMPARE = Set.of("=", "<>", "<=>", "<", "<=", ">", ">=");

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
    if (c.length != 2 || (op == null && !COMPARE.contains(name))) {
      return null;
    }
    String col = op == null ? null : column(c[0]);
    ObjectNode value = op == null ? null : literal(c[1]);
    if (col == null && FLIPPED.containsKey(name)) {
      col = column(c[1]);
      value = literal(c[0]);
      op = OPS.get(FLIPPED.get(name));
    }
    if (col == null || value == null) {
      return compare(name, c);
    }
    out.put("op", op);
    out.put("column", col);
    out.set("value", value);
    return out;
  }

  /** {@code {"op": "Compare", "cmp": name, "left": E, "right": E}}, or null when a side has no form. */
  private static ObjectNode compare(String name, Expression[] c) {
    if (!COMPARE.contains(name)) {
      return null;
    }
    ObjectNode left = expression(c[0]);
    ObjectNode right = expression(c[1]);
    if (left == null || right == null) {
      return null;
    }
    ObjectNode out = F.objectNode();
    out.put("op", "Compare");
    out.put("cmp", name);
    out.set("left", left);
    out.set("right", right);
    return out;
  }

  /**
   * A column, a literal, or {@code e % k} by an integer literal other than 0 and the BIGINT
   * minimum: Spark translates {@code %} in ANSI mode only, its default, where a remainder by a
   * non-zero constant cannot fail (the worker computes Java's remainder). Else null.
   */
  private static ObjectNode expression(Expression e) {
    ObjectNode out = F.objectNode();
    String col = column(e);
    if (col != null) {
      out.put("column", col);
      return out;
    }
    if (e instanceof Literal) {
      ObjectNode lit = literal(e);
      if (lit == null) {
        return null;
      }
      out.set("literal", lit);
      return out;
    }
    if (e instanceof Cast) {
      // a cast from an integer type to one at least as wide (Spark widens TINYINT n in n % 3)
      // changes no value: the worker compares the column itself
      Cast cast = (Cast) e;
      int from = integralWidth(cast.expressionDataType());
      int to = integralWidth(cast.dataType());
      return from > 0 && to >= from ? expression(cast.expression()) : null;
    }
    if (!(e instanceof GeneralScalarExpression) || !"%".equals(((GeneralScalarExpression) e).name())) {
      return null;
    }
    Expression[] args = e.children();
    if (args.length != 2 || !(args[1] instanceof Literal)) {
      return null;
    }
    Literal<?> k = (Literal<?>) args[1];
    if (integralWidth(k.dataType()) == 0 || !(k.value() instanceof Number)) {
      return null;
    }
    long by = ((Number) k.value()).longValue();
    ObjectNode operand = expression(args[0]);
    if (by == 0 || by == Long.MIN_VALUE || operand == null) {
      return null;
    }
    out.set("remainder", operand);
    out.put("by", by);
    return out;
  }

  /** The bytes of an integer type (TINYINT 1 .. BIGINT 8), 0 for any other type. */
  private static int integralWidth(DataType t) {
    if (t instanceof ByteType) {
      return 1;
    }
    if (t instanceof ShortType) {
      return 2;
    }
    if (t instanceof IntegerType) {
      return 4;
    }
    return t instanceof LongType ? 8 : 0;
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
