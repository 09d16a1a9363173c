package regionscan.spark;

import java.io.FileOutputStream;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

/**
 * Where a read's wall time goes on the JVM side, for profiling: with
 * {@code spark.regionscan.debug.timeline} set to a file, every driver planning request and every
 * task appends one JSON line there. A task's line splits its life into the time to get the
 * worker's first answer ({@code open_ms}), the time blocked reading its Arrow stream
 * ({@code wait_ms}: the worker producing, the bytes crossing the socket), the time turning
 * those bytes into vectors ({@code convert_ms}) and the time Spark spent on the batches between
 * two calls ({@code spark_ms}). Unset (the default), nothing is timed or written.
 */
final class ReadTimeline {
  static final String SETTING = "spark.regionscan.debug.timeline";

  private ReadTimeline() {
  }

  /** The file timelines go to, or null when timing is off. */
  static String target() {
    String path = SourceSettings.conf(SETTING, "");
    return path.isEmpty() ? null : path;
  }

  /** Append one JSON line to {@code path} (lines from concurrent tasks never interleave). */
  static synchronized void write(String path, String json) {
    try (FileOutputStream out = new FileOutputStream(path, true)) {
      out.write((json + "\n").getBytes(StandardCharsets.UTF_8));
    } catch (IOException e) {
      // a profiling aid: a file that cannot be written costs the read nothing
    }
  }

  /** A task's counters (nanoseconds), filled by {@link ArrowPartitionReader} when timing is on. */
  static final class Task {
    final String path;
    final long started;  // when the task asked for its worker: total_ms counts from here
    final long startedMillis;
    long open;
    long load;  // inside loadNextBatch: waiting on the stream and converting
    long spark;  // between returning a batch and being asked for the next
    long lastReturn;
    int batches;
    long rows;
    final Timed in;

    Task(String path, InputStream in, long started) {
      this.path = path;
      this.in = new Timed(in);
      this.started = started;
      this.startedMillis = System.currentTimeMillis() - (System.nanoTime() - started) / 1_000_000;
    }

    void finish(int splits) {
      long total = System.nanoTime() - started;
      long waited = in.blocked;
      write(path, String.format(java.util.Locale.ROOT,
          "{\"kind\":\"task\",\"thread\":\"%s\",\"start_ms\":%d,\"total_ms\":%.2f,\"open_ms\":%.2f,"
          + "\"wait_ms\":%.2f,\"convert_ms\":%.2f,\"spark_ms\":%.2f,\"batches\":%d,\"rows\":%d,\"bytes\":%d,"
          + "\"splits\":%d}",
          Thread.currentThread().getName(), startedMillis, total / 1e6, open / 1e6, waited / 1e6,
          (load - waited) / 1e6, spark / 1e6, batches, rows, in.bytes, splits));
    }
  }

  /** The stream a task reads, counting the time spent blocked in it and the bytes read. */
  static final class Timed extends FilterInputStream {
    long blocked;
    long bytes;

    Timed(InputStream in) {
      super(in);
    }

    @Override
    public int read() throws IOException {
      long t = System.nanoTime();
      int b = super.read();
      blocked += System.nanoTime() - t;
      bytes += b >= 0 ? 1 : 0;
      return b;
    }

    @Override
    public int read(byte[] buf, int off, int len) throws IOException {
      long t = System.nanoTime();
      int n = super.read(buf, off, len);
      blocked += System.nanoTime() - t;
      bytes += Math.max(n, 0);
      return n;
    }
  }
}
