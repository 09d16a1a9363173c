package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The partition transform of one scan layout: a row-key value to the index of the task whose
 * row ranges hold it (-1 when none does). Null is the key that reads as null (the string
 * SerDe's null sequence), else -1. Its name is a digest of the key's
 * stored form and every task's ranges, so two scans share a name (and Spark pairs their tasks
 * by index) only when their tasks hold the same key ranges; any other pair of scans has two
 * names, and Spark shuffles.
 *
 * A key value's stored bytes are computed exactly: a BINARY key's bytes, a STRING key's UTF-8
 * bytes (the worker names the encoding only where that is how the key is stored, and the key
 * that reads as null).
 */
final class TaskIndexFunction implements UnboundFunction, ScalarFunction<Integer> {
  private static final long serialVersionUID = 1L;
  private static final int REMEMBERED = 1024;
  /** Layouts by name, for {@link RegionScanCatalog#loadFunction}; the newest few are kept. */
  private static final Map<String, TaskIndexFunction> KNOWN = Collections.synchronizedMap(
      new LinkedHashMap<String, TaskIndexFunction>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, TaskIndexFunction> eldest) {
          return size() > REMEMBERED;
        }
      });

  private final String name;
  private final boolean utf8;
  private final byte[] nullKey;   // the stored key that reads as null, or null
  private final byte[][] starts;  // sorted, unsigned
  private final byte[][] stops;   // null: open
  private final int[] tasks;

  private TaskIndexFunction(String name, boolean utf8, byte[] nullKey, byte[][] starts, byte[][] stops, int[] tasks) {
    this.name = name;
    this.utf8 = utf8;
    this.nullKey = nullKey;
    this.starts = starts;
    this.stops = stops;
    this.tasks = tasks;
  }

  /**
   * The function of a plan's layout ({@code key_encoding}, {@code key_null}: base64 or null,
   * {@code task_ranges}), remembered by name.
   */
  static TaskIndexFunction of(String encoding, String nullKey, JsonNode taskRanges) {
    boolean utf8 = "utf8".equals(encoding);
    if (!utf8 && !"bytes".equals(encoding)) {
      throw new IllegalArgumentException("unknown key encoding " + encoding);
    }
    List<Object[]> ranges = new ArrayList<>();  // {start, stop, task}
    MessageDigest digest;
    try {
      digest = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
    digest.update((encoding + "/" + (nullKey == null ? "-" : nullKey)).getBytes(StandardCharsets.UTF_8));
    int task = 0;
    for (JsonNode t : taskRanges) {
      digest.update((";" + task).getBytes(StandardCharsets.UTF_8));
      for (JsonNode r : t) {
        byte[] start = Base64.getDecoder().decode(r.get(0).asText());
        JsonNode hi = r.get(1);
        byte[] stop = hi == null || hi.isNull() ? null : Base64.getDecoder().decode(hi.asText());
        ranges.add(new Object[] {start, stop, task});
        String edges = "," + r.get(0).asText() + ":" + (stop == null ? "" : hi.asText());
        digest.update(edges.getBytes(StandardCharsets.UTF_8));
      }
      task++;
    }
    ranges.sort((a, b) -> Arrays.compareUnsigned((byte[]) a[0], (byte[]) b[0]));
    byte[][] starts = new byte[ranges.size()][];
    byte[][] stops = new byte[ranges.size()][];
    int[] owners = new int[ranges.size()];
    for (int i = 0; i < owners.length; i++) {
      starts[i] = (byte[]) ranges.get(i)[0];
      stops[i] = (byte[]) ranges.get(i)[1];
      owners[i] = (Integer) ranges.get(i)[2];
    }
    StringBuilder hex = new StringBuilder("regionscan_tasks_");
    byte[] d = digest.digest();
    for (int i = 0; i < 12; i++) {
      hex.append(String.format("%02x", d[i] & 0xff));
    }
    TaskIndexFunction f = new TaskIndexFunction(hex.toString(), utf8,
        nullKey == null ? null : Base64.getDecoder().decode(nullKey), starts, stops, owners);
    KNOWN.put(f.name, f);
    return f;
  }

  /** A layout a scan of this JVM reported, or null. */
  static TaskIndexFunction known(String name) {
    return KNOWN.get(name);
  }

  static String[] knownNames() {
    synchronized (KNOWN) {
      return KNOWN.keySet().toArray(new String[0]);
    }
  }

  /** The index of the task holding the row with these stored key bytes, or -1. */
  int taskOf(byte[] key) {
    int lo = 0;
    int hi = starts.length - 1;
    int found = -1;
    while (lo <= hi) {  // the last range starting at or before key
      int mid = (lo + hi) >>> 1;
      if (Arrays.compareUnsigned(starts[mid], key) <= 0) {
        found = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    if (found < 0 || (stops[found] != null && Arrays.compareUnsigned(key, stops[found]) >= 0)) {
      return -1;
    }
    return tasks[found];
  }

  private DataType keyType() {
    return utf8 ? DataTypes.StringType : DataTypes.BinaryType;
  }

  @Override
  public BoundFunction bind(StructType inputType) {
    if (inputType.fields().length != 1 || !inputType.fields()[0].dataType().equals(keyType())) {
      throw new UnsupportedOperationException(name + " takes one " + keyType().simpleString() + " row key");
    }
    return this;
  }

  @Override
  public DataType[] inputTypes() {
    return new DataType[] {keyType()};
  }

  @Override
  public DataType resultType() {
    return DataTypes.IntegerType;
  }

  @Override
  public boolean isResultNullable() {
    return false;
  }

  @Override
  public Integer produceResult(InternalRow input) {
    if (input.isNullAt(0)) {
      return nullKey == null ? -1 : taskOf(nullKey);  // the task of the key that reads as null, if any
    }
    return taskOf(utf8 ? input.getUTF8String(0).getBytes() : input.getBinary(0));
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public String canonicalName() {
    return name;
  }

  @Override
  public String toString() {
    return name;  // as Spark shows the transform in a plan
  }

  @Override
  public String description() {
    return name + "(key): the index of the regionscan task whose row ranges hold the key";
  }
}
