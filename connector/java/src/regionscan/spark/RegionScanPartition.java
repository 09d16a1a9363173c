package regionscan.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** One task: its read request (JSON: the read's plan as the worker serialized it on the driver, and the
 * task's packed splits) and the hosts of its data. */
final class RegionScanPartition implements InputPartition {
  private static final long serialVersionUID = 1L;
  final String request;
  private final String[] hosts;

  RegionScanPartition(String request, String[] hosts) {
    this.request = request;
    this.hosts = hosts;
  }

  @Override
  public String[] preferredLocations() {
    return hosts;
  }
}
