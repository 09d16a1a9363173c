package regionscan.spark;

import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.expressions.Cast;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.GeneralScalarExpression;
import org.apache.spark.sql.connector.expressions.Literal;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StructType;

/**
 * The arithmetic inside a pushed SUM or COUNT ({@code SUM(l_extendedprice * (1 - l_discount))})
 * as the worker takes it (PROTOCOL.md, "count"): {@code +}, {@code -} and {@code *} of INT,
 * BIGINT and DECIMAL columns, literals of those types and Spark's casts between them. The
 * worker derives each node's type by Spark's rules and evaluates the tree exactly; anything
 * else stays with Spark.
 */
final class AggregateExpressions {
  private AggregateExpressions() {}

  /** {@code e} as the worker's JSON tree, or null when it holds anything the worker does not evaluate. */
  static ObjectNode toJson(Expression e, StructType full) {
    ObjectNode out = WorkerProcess.JSON.createObjectNode();
    if (e instanceof NamedReference) {
      String[] names = ((NamedReference) e).fieldNames();
      if (names.length != 1 || !full.getFieldIndex(names[0]).isDefined()
          || !arithmetic(full.apply(names[0]).dataType())) {
        return null;
      }
      out.put("column", names[0]);
      return out;
    }
    if (e instanceof Literal) {
      Literal<?> lit = (Literal<?>) e;
      Object v = lit.value();
      if (v == null || !arithmetic(lit.dataType())) {
        return null;  // a null literal makes the whole expression null: rare enough for Spark
      }
      out.put("literal", v instanceof Decimal ? ((Decimal) v).toJavaBigDecimal().toPlainString() : v.toString());
      out.put("type", lit.dataType().simpleString());
      return out;
    }
    if (e instanceof Cast) {
      Cast c = (Cast) e;
      ObjectNode child = toJson(c.expression(), full);
      if (child == null || !arithmetic(c.dataType())) {
        return null;
      }
      out.set("cast", child);
      out.put("type", c.dataType().simpleString());
      return out;
    }
    if (e instanceof GeneralScalarExpression) {
      String op = ((GeneralScalarExpression) e).name();
      Expression[] args = e.children();
      if (!("+".equals(op) || "-".equals(op) || "*".equals(op)) || args.length != 2) {
        return null;
      }
      ObjectNode left = toJson(args[0], full);
      ObjectNode right = left == null ? null : toJson(args[1], full);
      if (right == null) {
        return null;
      }
      out.put("op", op);
      out.putArray("args").add(left).add(right);
      return out;
    }
    return null;
  }

  private static boolean arithmetic(DataType type) {
    return type instanceof IntegerType || type instanceof LongType || type instanceof DecimalType;
  }
}
