package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructType;

import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;

/**
 * A planned read: the worker plans the splits (one per region, pinned) and packs them into
 * tasks by size, as Spark packs files ({@code spark.sql.files.maxPartitionBytes}, the open cost).
 */
final class RegionScanScan implements Scan, Batch, SupportsReportStatistics {
  private final SourceSettings settings;
  private final StructType required;
  private final ArrayNode filters;
  private final String pushedFilters;
  private final int limit;
  private JsonNode plan;

  RegionScanScan(SourceSettings settings, StructType required, ArrayNode filters, String pushedFilters, int limit) {
    this.settings = settings;
    this.required = required;
    this.filters = filters;
    this.pushedFilters = pushedFilters;
    this.limit = limit;
  }

  private ObjectNode request(String op) {
    ObjectNode req = settings.request(op);
    ArrayNode cols = req.putArray("columns");
    for (String name : required.fieldNames()) {
      cols.add(name);
    }
    req.set("filters", filters);
    req.put("schema", required.json());
    if (limit >= 0) {
      req.put("limit", limit);
    }
    return req;
  }

  private synchronized JsonNode plan() {
    if (plan == null) {
      ObjectNode req = request("plan");
      SQLConf conf = SQLConf.get();
      req.put("max_partition_bytes", conf.filesMaxPartitionBytes());
      req.put("open_cost", conf.filesOpenCostInBytes());
      String key = "spark.sql.leafNodeDefaultParallelism";
      req.put("parallelism", conf.contains(key) ? Integer.parseInt(conf.getConfString(key))
          : SparkContext.getOrCreate().defaultParallelism());
      plan = settings.call(req);
    }
    return plan;
  }

  @Override
  public StructType readSchema() {
    return required;
  }

  @Override
  public String description() {
    StringBuilder sb = new StringBuilder(settings.tableName());
    sb.append(" PushedFilters: ").append(pushedFilters);
    if (limit >= 0) {
      sb.append(", PushedLimit: ").append(limit);
    }
    sb.append(", ReadSchema: ").append(required.simpleString());
    return sb.toString();
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public InputPartition[] planInputPartitions() {
    JsonNode tasks = plan().path("tasks");
    ObjectNode read = request("read");
    List<InputPartition> out = new ArrayList<>();
    for (JsonNode task : tasks) {
      read.set("splits", task.path("splits"));
      List<String> hosts = new ArrayList<>();
      for (JsonNode h : task.path("hosts")) {
        hosts.add(h.asText());
      }
      out.add(new RegionScanPartition(read.toString(), hosts.toArray(new String[0])));
    }
    return out.toArray(new InputPartition[0]);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new RegionScanReaderFactory(settings);
  }

  @Override
  public Statistics estimateStatistics() {
    JsonNode p = plan();
    long size = p.path("size_bytes").asLong(0);
    return new Statistics() {
      @Override
      public OptionalLong sizeInBytes() {
        return OptionalLong.of(size);
      }

      @Override
      public OptionalLong numRows() {
        return OptionalLong.empty();
      }
    };
  }
}
