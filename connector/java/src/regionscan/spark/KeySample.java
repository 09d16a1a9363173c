package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.StructType;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.nio.channels.Channels;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Random;

/**
 * A weighted sample of a DataFrame's row-key columns, taken on the driver before a write that
 * creates its table with {@code newtable} regions, so the worker splits the table at the
 * quantiles of the encoded keys (connector/write_splits.py) instead of the first key byte.
 *
 * As Spark's range partitioner does, each input partition keeps a reservoir of rows (twice its
 * share of the wanted size) and counts its rows; a sampled row weighs its partition's rows per
 * sampled row, so partitions of unequal size count as they should. The sample goes to the
 * worker as an Arrow IPC stream (base64) with the weights, in {@code write_begin}.
 */
final class KeySample {

  /** One partition's reservoir and how many rows the partition had. */
  private static final class Reservoir implements Serializable {
    private static final long serialVersionUID = 1L;
    final long count;
    final InternalRow[] rows;

    Reservoir(long count, InternalRow[] rows) {
      this.count = count;
      this.rows = rows;
    }
  }

  private static final class Sampler implements FlatMapFunction<Iterator<InternalRow>, Reservoir> {
    private static final long serialVersionUID = 1L;
    private final int size;
    private final long seed;

    Sampler(int size, long seed) {
      this.size = size;
      this.seed = seed;
    }

    @Override
    public Iterator<Reservoir> call(Iterator<InternalRow> rows) {
      org.apache.spark.TaskContext ctx = org.apache.spark.TaskContext.get();
      Random random = new Random(seed + (ctx != null ? ctx.partitionId() : 0));
      List<InternalRow> kept = new ArrayList<>(size);
      long count = 0;
      while (rows.hasNext()) {
        InternalRow row = rows.next();
        count++;
        if (kept.size() < size) {
          kept.add(row.copy());  // rows are reused by the iterator
        } else {
          long slot = (long) (random.nextDouble() * count);
          if (slot < size) {
            kept.set((int) slot, row.copy());
          }
        }
      }
      return Collections.singletonList(new Reservoir(count, kept.toArray(new InternalRow[0]))).iterator();
    }
  }

  final List<String> names;
  final StructType schema;
  /** The sampled rows in the order they were sent (the worker's {@code cut_rows} index them). */
  final List<InternalRow> rows = new ArrayList<>();
  final List<Double> weights = new ArrayList<>();

  private KeySample(List<String> names, StructType schema) {
    this.names = names;
    this.schema = schema;
  }

  private static Column column(Dataset<Row> data, String name) {
    return data.col("`" + name.replace("`", "``") + "`");
  }

  /**
   * {@code data}'s key sample as {@code decision}'s {@code sample} asks ({@code columns}: the key
   * columns, {@code rows}: how many in all), or null when it asks none or the DataFrame lacks a
   * key column (write_begin then says so in one line).
   */
  static KeySample take(Dataset<Row> data, JsonNode decision) {
    JsonNode spec = decision.path("sample");
    if (!spec.isObject()) {
      return null;
    }
    List<String> names = new ArrayList<>();
    for (JsonNode name : spec.path("columns")) {
      names.add(name.asText());
    }
    List<String> present = java.util.Arrays.asList(data.schema().fieldNames());
    if (names.isEmpty() || !present.containsAll(names)) {
      return null;
    }
    Column[] columns = new Column[names.size()];
    for (int i = 0; i < columns.length; i++) {
      columns[i] = column(data, names.get(i));
    }
    Dataset<Row> keys = data.select(columns);
    KeySample sample = new KeySample(names, keys.schema());
    JavaRDD<InternalRow> rdd = keys.queryExecution().toRdd().toJavaRDD();
    int partitions = Math.max(1, rdd.getNumPartitions());
    int per = (int) Math.max(1, Math.ceil(2.0 * spec.path("rows").asInt(1000) / partitions));
    for (Reservoir r : rdd.mapPartitions(new Sampler(per, 0x5eedL)).collect()) {
      for (InternalRow row : r.rows) {
        sample.rows.add(row);
        sample.weights.add((double) r.count / r.rows.length);
      }
    }
    return sample;
  }

  /** Put the sample in the {@code write_begin} request: {@code sample} (base64 Arrow IPC) and {@code sample_weights}. */
  void addTo(ObjectNode req) {
    ArrayNode w = req.putArray("sample_weights");
    weights.forEach(w::add);
    ArrowWriter arrow = ArrowWriter.create(schema, "UTC", true, false);
    VectorSchemaRoot root = arrow.root();
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (ArrowStreamWriter stream = new ArrowStreamWriter(root, null, Channels.newChannel(bytes))) {
      stream.start();
      for (InternalRow row : rows) {
        arrow.write(row);
      }
      arrow.finish();
      stream.writeBatch();
      stream.end();
    } catch (IOException e) {
      throw new IllegalStateException("could not encode the key sample: " + e.getMessage(), e);
    } finally {
      root.close();
    }
    req.put("sample", Base64.getEncoder().encodeToString(bytes.toByteArray()));
  }

  /**
   * {@code data} with each region's rows in one task, in key order: the region of a row is how
   * many region starts (the sampled rows {@code cutRows}, in key order) its key values reach, as
   * Spark compares them (the worker sends {@code cut_rows} only where the key encoding keeps that
   * order). One task per region then stages one file per region and family.
   */
  Dataset<Row> byRegion(Dataset<Row> data, int[] cutRows) {
    scala.Function1<Object, Object> toRow =
        org.apache.spark.sql.catalyst.CatalystTypeConverters.createToScalaConverter(schema);
    Column[] keys = new Column[names.size()];
    for (int i = 0; i < keys.length; i++) {
      keys[i] = column(data, names.get(i));
    }
    Column key = keys.length == 1 ? keys[0] : functions.struct(keys);
    Column region = functions.lit(0);
    for (int cut : cutRows) {
      Row start = (Row) toRow.apply(rows.get(cut));
      Column bound;
      if (keys.length == 1) {
        bound = functions.lit(start.get(0)).cast(schema.fields()[0].dataType());
      } else {
        Column[] parts = new Column[keys.length];
        for (int i = 0; i < parts.length; i++) {
          parts[i] = functions.lit(start.get(i)).cast(schema.fields()[i].dataType()).as(names.get(i));
        }
        bound = functions.struct(parts);
      }
      region = region.plus(functions.when(key.geq(bound), 1).otherwise(0));
    }
    return data.repartitionByRange(cutRows.length + 1, region).sortWithinPartitions(keys);
  }
}
