package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.internal.SQLConf;

import java.io.IOException;
import java.io.Serializable;
import java.util.Map;
import java.util.TreeMap;

/**
 * The read's options and the Python that serves them; serializable, so tasks carry it.
 *
 * The worker's Python is {@code spark.regionscan.python} (a session setting, else the
 * application's), else {@code spark.pyspark.python},
 * else {@code PYSPARK_PYTHON}, else {@code python3}; {@code spark.regionscan.pythonpath} goes
 * first on its PYTHONPATH. On an executor its own settings win over the driver's.
 */
final class SourceSettings implements Serializable {
  private static final long serialVersionUID = 1L;
  final TreeMap<String, String> options;
  final String python;
  final String pythonPath;

  SourceSettings(Map<String, String> options) {
    this.options = new TreeMap<>();
    for (Map.Entry<String, String> e : options.entrySet()) {
      if (!e.getKey().equalsIgnoreCase("path") || !e.getValue().isEmpty()) {
        this.options.put(e.getKey(), e.getValue());
      }
    }
    this.python = resolvePython(null);
    this.pythonPath = conf("spark.regionscan.pythonpath", "");
  }

  /** A setting: the session's runtime value, else the SparkConf's, else {@code fallback}. */
  static String conf(String key, String fallback) {
    String session = SQLConf.get().getConfString(key, null);  // runtime settings (spark.conf.set) first
    if (session != null && !session.isEmpty()) {
      return session;
    }
    SparkEnv env = SparkEnv.get();
    if (env == null) {
      return fallback;
    }
    SparkConf conf = env.conf();
    return conf.get(key, fallback);
  }

  private static String resolvePython(String fallback) {
    String fromEnv = System.getenv("PYSPARK_PYTHON");
    String base = fallback != null ? fallback : (fromEnv != null && !fromEnv.isEmpty() ? fromEnv : "python3");
    return conf("spark.regionscan.python", conf("spark.pyspark.python", base));
  }

  /** This JVM's worker (on an executor: its own Python setting if it has one). */
  WorkerProcess worker() throws IOException {
    return WorkerProcess.get(resolvePython(python), conf("spark.regionscan.pythonpath", pythonPath));
  }

  /** A request of {@code op} carrying the options. */
  ObjectNode request(String op) {
    ObjectNode req = WorkerProcess.JSON.createObjectNode();
    req.put("op", op);
    ObjectNode opts = req.putObject("options");
    options.forEach(opts::put);
    return req;
  }

  /** A planning request; a worker error becomes one line (IllegalArgumentException). */
  JsonNode call(ObjectNode request) {
    long started = System.nanoTime();
    String op = request.path("op").asText();
    try {
      try {
        return worker().call(request);
      } catch (WorkerProcess.Refused gone) {
        return worker().call(request);  // the worker was gone before the request: once more, to a new one
      }
    } catch (IOException e) {
      throw new IllegalArgumentException(e.getMessage(), null);
    } finally {
      String timeline = ReadTimeline.target();
      if (timeline != null) {
        ReadTimeline.write(timeline, String.format(java.util.Locale.ROOT, "{\"kind\":\"rpc\",\"op\":\"%s\",\"start_ms\":%d,\"ms\":%.2f}",
            op, System.currentTimeMillis(), (System.nanoTime() - started) / 1e6));
      }
    }
  }

  /** A short name of the table for plans: {@code regionscan table under root}. */
  String tableName() {
    String table = options.getOrDefault("table", options.getOrDefault("hbase.table", "?"));
    return "regionscan " + table;
  }
}
