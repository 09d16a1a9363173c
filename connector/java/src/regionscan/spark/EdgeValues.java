package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.types.UTF8String;

import java.math.BigDecimal;
import java.util.Base64;

/**
 * MIN/MAX values of the row key from the worker (tagged literals, PROTOCOL.md "Filters") as
 * Spark's internal values of the column's type.
 */
final class EdgeValues {
  private EdgeValues() {
  }

  /** True for the key types whose MIN/MAX the worker may answer (strings only in binary order). */
  static boolean supported(DataType type) {
    if (type instanceof StringType) {
      return ((StringType) type).supportsBinaryOrdering();
    }
    return type instanceof BinaryType || type instanceof IntegerType || type instanceof LongType
        || type instanceof ShortType || type instanceof ByteType || type instanceof DateType
        || type instanceof TimestampType || type instanceof TimestampNTZType || type instanceof DecimalType;
  }

  /** The internal value of {@code literal} as {@code type} (null for the null literal). */
  static Object toSpark(JsonNode literal, DataType type) {
    if ("null".equals(literal.path("t").asText())) {
      return null;
    }
    JsonNode v = literal.path("v");
    if (type instanceof StringType) {
      return UTF8String.fromString(v.asText());
    }
    if (type instanceof BinaryType) {
      return Base64.getDecoder().decode(v.asText());
    }
    if (type instanceof IntegerType || type instanceof DateType) {
      return v.asInt();
    }
    if (type instanceof LongType || type instanceof TimestampType || type instanceof TimestampNTZType) {
      return v.asLong();
    }
    if (type instanceof ShortType) {
      return (short) v.asInt();
    }
    if (type instanceof ByteType) {
      return (byte) v.asInt();
    }
    if (type instanceof DecimalType) {
      DecimalType d = (DecimalType) type;
      return Decimal.apply(new BigDecimal(v.asText()), d.precision(), d.scale());
    }
    throw new IllegalArgumentException("the regionscan worker answered a MIN/MAX of type " + type.simpleString());
  }
}
