package regionscan.spark;

import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.TimeStampMicroTZVector;
import org.apache.arrow.vector.TimeStampMicroVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

import java.nio.ByteOrder;

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
 * Spark reads a batch one value at a time ({@code isNullAt}, then {@code getInt} ...).
 * ArrowColumnVector answers each through an accessor, the vector's own null check and the
 * buffer's bounds and reference-count checks: several calls and a volatile read per value.
 * For the flat types the worker sends (integers, dates, timestamps, floats, decimals, strings,
 * binaries) this column instead reads the batch's buffers at their addresses, as Spark's own
 * off-heap column vectors do: {@link #refresh()}, called by the reader after each batch is
 * loaded, takes the buffers' addresses and the batch's null count (a batch without nulls then
 * answers {@code isNullAt} without reading its validity bits). Spark asks only for rows below
 * the batch's row count and only while the batch is current, and the addresses are taken
 * again for every batch. Other types (nested, booleans) use ArrowColumnVector's accessors.
 *
 * A DECIMAL of at most 18 digits (TPC-H's DECIMAL(15,2)) is read as Spark keeps it in its own
 * column vectors: the unscaled value as a long. Arrow stores every decimal in 16 little-endian
 * bytes, two's complement; for at most 18 digits the value fits the low 8, read as a signed
 * long. ArrowColumnVector would build a BigDecimal per value instead, which cost a query over
 * lineitem's four decimal columns more than all of the worker's work.
 */
final class StreamColumnVector extends ArrowColumnVector {
  /** Arrow buffers are little-endian; direct reads are used only where the machine's order is too. */
  private static final boolean LITTLE_ENDIAN = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;

  private final ValueVector vector;
  private final boolean direct;  // a flat vector whose values are read at their addresses
  private final boolean longDecimal;  // a DECIMAL(p <= 18), read as a long
  private final int decimalScale;
  private final int width;  // bytes per value of a fixed-width vector, 0 for strings and binaries
  private final boolean floating;  // FLOAT or DOUBLE: read by getFloat / getDouble, not as integers
  // the current batch's buffers (refresh()); validity is 0 when the batch has no null
  private long validity;
  private long data;
  private long offsets;
  private int nulls;

  StreamColumnVector(ValueVector vector) {
    super(vector);
    this.vector = vector;
    boolean fixed = vector instanceof IntVector || vector instanceof DateDayVector || vector instanceof BigIntVector
        || vector instanceof TimeStampMicroVector || vector instanceof TimeStampMicroTZVector
        || vector instanceof SmallIntVector || vector instanceof TinyIntVector || vector instanceof Float8Vector
        || vector instanceof Float4Vector || vector instanceof DecimalVector;
    boolean variable = vector instanceof VarCharVector || vector instanceof VarBinaryVector;
    this.direct = LITTLE_ENDIAN && (fixed || variable);
    this.width = fixed ? ((BaseFixedWidthVector) vector).getTypeWidth() : 0;
    this.floating = vector instanceof Float4Vector || vector instanceof Float8Vector;
    this.longDecimal = vector instanceof DecimalVector
        && ((DecimalVector) vector).getPrecision() <= Decimal.MAX_LONG_DIGITS();
    this.decimalScale = vector instanceof DecimalVector ? ((DecimalVector) vector).getScale() : 0;
  }

  /** Take the buffers of the batch the stream reader has just loaded into this column's vector. */
  void refresh() {
    if (!direct) {
      return;
    }
    nulls = vector.getNullCount();
    if (width > 0) {
      BaseFixedWidthVector v = (BaseFixedWidthVector) vector;
      validity = nulls == 0 ? 0 : v.getValidityBufferAddress();
      data = v.getDataBufferAddress();
    } else {
      BaseVariableWidthVector v = (BaseVariableWidthVector) vector;
      validity = nulls == 0 ? 0 : v.getValidityBufferAddress();
      data = v.getDataBufferAddress();
      offsets = v.getOffsetBufferAddress();
    }
  }

  @Override
  public boolean hasNull() {
    return direct ? nulls > 0 : super.hasNull();
  }

  @Override
  public int numNulls() {
    return direct ? nulls : super.numNulls();
  }

  @Override
  public boolean isNullAt(int rowId) {
    if (!direct) {
      return super.isNullAt(rowId);
    }
    return validity != 0 && ((Platform.getByte(null, validity + (rowId >> 3)) >> (rowId & 7)) & 1) == 0;
  }

  @Override
  public byte getByte(int rowId) {
    return direct && width == 1 && !floating ? Platform.getByte(null, data + rowId) : super.getByte(rowId);
  }

  @Override
  public short getShort(int rowId) {
    return direct && width == 2 && !floating ? Platform.getShort(null, data + 2L * rowId) : super.getShort(rowId);
  }

  @Override
  public int getInt(int rowId) {
    return direct && width == 4 && !floating ? Platform.getInt(null, data + 4L * rowId) : super.getInt(rowId);
  }

  @Override
  public long getLong(int rowId) {
    return direct && width == 8 && !floating ? Platform.getLong(null, data + 8L * rowId) : super.getLong(rowId);
  }

  @Override
  public float getFloat(int rowId) {
    return direct && floating && width == 4 ? Platform.getFloat(null, data + 4L * rowId) : super.getFloat(rowId);
  }

  @Override
  public double getDouble(int rowId) {
    return direct && floating && width == 8 ? Platform.getDouble(null, data + 8L * rowId) : super.getDouble(rowId);
  }

  @Override
  public Decimal getDecimal(int rowId, int precision, int scale) {
    if (!longDecimal || precision > Decimal.MAX_LONG_DIGITS() || scale != decimalScale) {
      return super.getDecimal(rowId, precision, scale);
    }
    if (isNullAt(rowId)) {
      return null;
    }
    long unscaled = direct
        ? Platform.getLong(null, data + (long) rowId * DecimalVector.TYPE_WIDTH)
        : ((DecimalVector) vector).getDataBuffer().getLong((long) rowId * DecimalVector.TYPE_WIDTH);
    return Decimal.createUnsafe(unscaled, precision, scale);
  }

  @Override
  public UTF8String getUTF8String(int rowId) {
    if (!direct || width != 0) {
      return super.getUTF8String(rowId);
    }
    if (isNullAt(rowId)) {
      return null;
    }
    // no copy: the string points into the batch's buffer, as ArrowColumnVector's does
    int start = Platform.getInt(null, offsets + 4L * rowId);
    int end = Platform.getInt(null, offsets + 4L * rowId + 4);
    return UTF8String.fromAddress(null, data + start, end - start);
  }

  @Override
  public byte[] getBinary(int rowId) {
    if (!direct || width != 0) {
      return super.getBinary(rowId);
    }
    if (isNullAt(rowId)) {
      return null;
    }
    int start = Platform.getInt(null, offsets + 4L * rowId);
    int end = Platform.getInt(null, offsets + 4L * rowId + 4);
    byte[] out = new byte[end - start];
    Platform.copyMemory(null, data + start, out, Platform.BYTE_ARRAY_OFFSET, out.length);
    return out;
  }

  @Override
  public void closeIfFreeable() {
    // the stream reader reuses the vector for the next batch and frees it at the end
  }
}
