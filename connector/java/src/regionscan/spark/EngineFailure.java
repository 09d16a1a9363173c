package regionscan.spark;

import org.apache.spark.SparkThrowable;
import org.apache.spark.sql.execution.QueryExecutionException;

import java.util.Map;

/**
 * A regionscan task's failure (the engine's error, or its worker's death) as one line.
 *
 * Spark hands a task's exception to the driver as it is when it is a {@link SparkThrowable} with
 * an error condition, instead of burying its text in "Job aborted due to stage failure" and two
 * stacks; and pyspark turns a {@link QueryExecutionException} into its Python twin, whose message
 * is this line alone. So a user's script sees
 * {@code QueryExecutionException: DecodeError: cannot decode column 'a' ...}, for reads, writes
 * and counts alike. The line names the worker's log, which holds the Python stack.
 */
final class EngineFailure extends QueryExecutionException implements SparkThrowable {
  private static final long serialVersionUID = 1L;
  /** The error condition Spark and pyspark report ({@code getCondition()}). */
  static final String CONDITION = "REGIONSCAN_ENGINE_ERROR";

  private EngineFailure(String line, Throwable cause) {
    super(line, cause);
  }

  /**
   * Throws the failure {@code line} (with {@code cause} kept for a debugger or DEBUG logs) from
   * code whose signature allows only IOException or nothing: QueryExecutionException is checked,
   * but Spark's task loop catches every Throwable. Declared to return so callers can write
   * {@code throw EngineFailure.raise(...)}.
   */
  static RuntimeException raise(String line, Throwable cause) {
    throw EngineFailure.<RuntimeException>sneaky(new EngineFailure(line, cause));
  }

  /** Throws {@code failure} as it is, checked or not (see {@link #raise}). */
  static <T extends RuntimeException> T rethrow(Throwable failure) {
    throw EngineFailure.<RuntimeException>sneaky(failure);
  }

  @SuppressWarnings("unchecked")
  private static <T extends Throwable> T sneaky(Throwable failure) throws T {
    throw (T) failure;
  }

  /** Whether {@code t} is already such a failure (rethrown as it is). */
  static boolean is(Throwable t) {
    return t instanceof EngineFailure;
  }

  @Override
  public String getCondition() {
    return CONDITION;
  }

  @Override
  public String getSqlState() {
    return "58030";  // SQL's "I/O error": the engine, outside Spark, failed
  }

  @Override
  public Map<String, String> getMessageParameters() {
    return Map.of("message", String.valueOf(getMessage()));
  }

  @Override
  public String getDefaultMessageTemplate() {
    return "<message>";  // the condition is not in Spark's error-conditions.json: nothing to look up
  }
}
