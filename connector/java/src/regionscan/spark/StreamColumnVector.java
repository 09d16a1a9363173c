package regionscan.spark;

import org.apache.arrow.vector.ValueVector;
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
 */
final class StreamColumnVector extends ArrowColumnVector {
  StreamColumnVector(ValueVector vector) {
    super(vector);
  }

  @Override
  public void closeIfFreeable() {
    // the stream reader reuses the vector for the next batch and frees it at the end
  }
}
