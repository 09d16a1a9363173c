package regionscan.spark;

import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ArrowColumnVector;

/**
 * A column of a task's Arrow stream: an {@link ArrowColumnVector} over one of the stream's
 * vectors, which the stream reader refills for every batch (struct, list and map vectors
 * included: Spark reads them as its nested types).
 *
 * Spark calls {@link #closeIfFreeable()} on a batch's columns before it asks for the next
 * batch. For an ArrowColumnVector that is {@code close()}, and closing a struct vector drops
 * its child vectors, so the next batch of a struct column would fail to load ("should have as
 * many children as in the schema"). The vectors belong to the stream reader, which frees them
 * when the task ends ({@link ArrowPartitionReader#close()}), so this column frees nothing
 * between batches.
 *
 * A DECIMAL of at most 18 digits (TPC-H's DECIMAL(15,2)) is read as Spark keeps it in its own
 * column vectors: the unscaled value as a long. Arrow stores every decimal in 16 little-endian
 * bytes, two's complement; for at most 18 digits the value fits the low 8, read as a signed
 * long. ArrowColumnVector would build a BigDecimal per value instead, which cost a query over
 * lineitem's four decimal columns more than all of the worker's work.
 */
final class StreamColumnVector extends ArrowColumnVector {
  private final DecimalVector decimals;  // a DECIMAL(p <= 18) column, read as longs; else null

  StreamColumnVector(ValueVector vector) {
    super(vector);
    this.decimals = vector instanceof DecimalVector && ((DecimalVector) vector).getPrecision() <= Decimal.MAX_LONG_DIGITS()
        ? (DecimalVector) vector : null;
  }

  @Override
  public Decimal getDecimal(int rowId, int precision, int scale) {
    if (decimals == null || precision > Decimal.MAX_LONG_DIGITS() || scale != decimals.getScale()) {
      return super.getDecimal(rowId, precision, scale);
    }
    if (decimals.isNull(rowId)) {
      return null;
    }
    // the buffer is the batch's (refilled per batch): looked up per call, not kept
    ArrowBuf data = decimals.getDataBuffer();
    return Decimal.createUnsafe(data.getLong((long) rowId * DecimalVector.TYPE_WIDTH), precision, scale);
  }

  @Override
  public void closeIfFreeable() {
    // the stream reader reuses the vector for the next batch and frees it at the end
  }
}
