package regionscan.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedInputStream;
import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * This JVM's handle on its engine worker process: starts it, sends it requests, notices it die.
 * (The process runs {@code python -m connector.engine_worker}; its server is
 * {@code connector.worker.server.WorkerServer}.)
 *
 * One worker per JVM (driver and each executor), started on first use with the session's
 * Python ({@code python -m connector.engine_worker}), listening on a loopback port that it
 * prints on its first stdout line. Each request is one connection: a frame (see
 * connector/java/PROTOCOL.md) carrying the worker's secret, answered by a JSON frame and, for
 * reads, an Arrow IPC stream and a trailer frame. A worker that dies is forgotten, so the
 * next request starts a new one. The worker exits when this JVM closes its stdin.
 */
public final class WorkerProcess {
  static final ObjectMapper JSON = new ObjectMapper();
  static final byte[] MAGIC = "RSW1".getBytes(StandardCharsets.US_ASCII);
  static final int VERSION = 1;
  private static final int MAX_FRAME = 64 << 20;
  private static final long START_TIMEOUT_MS = 180_000;
  private static WorkerProcess current;

  final String python;
  final Process process;
  final int port;
  final String secret;
  final File log;

  private WorkerProcess(String python, Process process, int port, String secret, File log) {
    this.python = python;
    this.process = process;
    this.port = port;
    this.secret = secret;
    this.log = log;
  }

  /** This JVM's worker for {@code python}, started when there is none or the last one died. */
  static synchronized WorkerProcess get(String python, String pythonPath) throws IOException {
    if (current != null && (!current.process.isAlive() || !current.python.equals(python))) {
      current.process.destroy();
      current = null;
    }
    if (current == null) {
      current = start(python, pythonPath);
    }
    return current;
  }

  /** Drop {@code worker} (it died or misbehaved): the next request starts a new one. */
  static synchronized void forget(WorkerProcess worker) {
    if (current == worker) {
      current = null;
    }
    worker.process.destroy();
  }

  /** The process id of this JVM's worker, or -1 when none runs (for tests and diagnostics). */
  public static synchronized long currentPid() {
    return current != null && current.process.isAlive() ? current.process.pid() : -1;
  }

  /** The worker's cumulative statistics (JSON), starting one if needed; for tests and benchmarks. */
  public static String statsJson(String python, String pythonPath) throws IOException {
    WorkerProcess worker = get(python, pythonPath);
    ObjectNode req = JSON.createObjectNode();
    req.put("op", "stats");
    return worker.call(req).toString();
  }

  private static WorkerProcess start(String python, String pythonPath) throws IOException {
    byte[] raw = new byte[24];
    new SecureRandom().nextBytes(raw);
    String secret = HexFormat.of().formatHex(raw);
    File log = File.createTempFile("regionscan-engine-worker-", ".log");
    ProcessBuilder pb = new ProcessBuilder(python, "-m", "connector.engine_worker");
    pb.environment().put("REGIONSCAN_WORKER_SECRET", secret);
    // Arrow's buffers from glibc's malloc, whose thresholds the worker sets at its start and
    // whose heaps it faults in before it serves (connector/worker/allocator.py): with Arrow's
    // default pool (mimalloc here) a fresh worker's first scan faulted in its buffers anew,
    // about 100 MiB of system time on q06's first run. pyarrow picks its pool when imported,
    // so it is set here, before the process starts; a value the user set is kept.
    pb.environment().putIfAbsent("ARROW_DEFAULT_MEMORY_POOL", "system");
    String cacheSize = SourceSettings.conf("spark.regionscan.worker.blockCacheSize", "");
    if (!cacheSize.isEmpty()) {
      pb.environment().put("REGIONSCAN_BLOCK_CACHE_SIZE", cacheSize);
    }
    // the worker's default for reads that do not set regionscan.scan.cacheresults
    String cacheResults = SourceSettings.conf("spark.regionscan.worker.cacheResults", "");
    if (!cacheResults.isEmpty()) {
      pb.environment().put("REGIONSCAN_CACHE_RESULTS", cacheResults);
    }
    if (pythonPath != null && !pythonPath.isEmpty()) {
      String old = pb.environment().getOrDefault("PYTHONPATH", "");
      pb.environment().put("PYTHONPATH", old.isEmpty() ? pythonPath : pythonPath + File.pathSeparator + old);
    }
    pb.redirectError(ProcessBuilder.Redirect.appendTo(log));
    Process process;
    try {
      process = pb.start();
    } catch (IOException e) {
      throw new IOException("regionscan engine worker cannot start: " + python + ": " + e.getMessage()
          + " (set spark.regionscan.python to the Python that has regionscan installed)");
    }
    BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    String line = readLine(out, process);
    if (line == null || !line.startsWith("regionscan-engine-worker ")) {
      process.destroy();
      throw new IOException("regionscan engine worker cannot start: " + python + " -m connector.engine_worker "
          + (line == null ? "exited" : "printed " + line) + ": " + lastLine(log)
          + " (set spark.regionscan.python to the Python that has regionscan installed)");
    }
    int port = -1;
    for (String part : line.split(" ")) {
      if (part.startsWith("port=")) {
        port = Integer.parseInt(part.substring(5));
      }
    }
    Thread drain = new Thread(() -> {
      try {
        while (out.readLine() != null) {
          // the worker prints nothing after its first line; keep its pipe from filling anyway
        }
      } catch (IOException ignored) {
        // the worker ended
      }
    }, "regionscan-worker-stdout");
    drain.setDaemon(true);
    drain.start();
    Runtime.getRuntime().addShutdownHook(new Thread(process::destroy));
    return new WorkerProcess(python, process, port, secret, log);
  }

  private static String readLine(BufferedReader out, Process process) throws IOException {
    long deadline = System.currentTimeMillis() + START_TIMEOUT_MS;
    StringBuilder sb = new StringBuilder();
    while (System.currentTimeMillis() < deadline) {
      if (out.ready()) {
        int c = out.read();
        if (c < 0) {
          return null;
        }
        if (c == '\n') {
          return sb.toString();
        }
        sb.append((char) c);
        continue;
      }
      if (!process.isAlive()) {
        String rest = out.readLine();
        return rest == null ? (sb.length() == 0 ? null : sb.toString()) : sb + rest;
      }
      try {
        TimeUnit.MILLISECONDS.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("interrupted while the regionscan engine worker started");
      }
    }
    return null;
  }

  private static String lastLine(File log) {
    try {
      List<String> lines = Files.readAllLines(log.toPath(), StandardCharsets.UTF_8);
      for (int i = lines.size() - 1; i >= 0; i--) {
        if (!lines.get(i).isBlank()) {
          return lines.get(i).trim();
        }
      }
    } catch (IOException ignored) {
      // nothing to add
    }
    return "no output";
  }

  /**
   * A one-line description of a failure of this worker, naming its log. A worker killed a moment
   * ago may not read as dead yet: its end is awaited briefly, so the line says "died" when it did.
   */
  String died(String what, Exception cause) {
    String state = ended() ? "died (exit " + process.exitValue() + ")" : "failed";
    return "regionscan engine worker (pid " + process.pid() + ") " + state + " during " + what + ": "
        + cause.getMessage() + "; the next task starts a new worker (log: " + log + ", last line: "
        + lastLine(log) + ")";
  }

  /**
   * An error this worker answered with (its one line, e.g. a DecodeError), as a task reports it:
   * the line first, then where the worker logged its Python stack.
   */
  String taskError(String line) {
    return line + " (regionscan engine worker pid " + process.pid() + "; its log, with the stack: " + log + ")";
  }

  /** The worker answered the request with an error (its one line): it is alive and nothing was lost. */
  static final class Answered extends IOException {
    private static final long serialVersionUID = 1L;

    Answered(String message) {
      super(message);
    }
  }

  /**
   * The worker refused the connection: it is gone (a live worker always listens), nothing was
   * sent, and the request may go to a new worker (one killed a moment ago may not yet read as dead).
   */
  static final class Refused extends IOException {
    private static final long serialVersionUID = 1L;

    Refused(String message) {
      super(message);
    }
  }

  /** One open request: the socket and its buffered input. */
  final class Exchange implements AutoCloseable {
    final Socket socket;
    final InputStream in;

    Exchange(Socket socket) throws IOException {
      this.socket = socket;
      this.in = new BufferedInputStream(socket.getInputStream(), 1 << 16);
    }

    /** The next response frame as JSON. */
    JsonNode readFrame() throws IOException {
      DataInputStream data = new DataInputStream(in);
      int n = data.readInt();
      if (n < 0 || n > MAX_FRAME) {
        throw new IOException("bad frame length " + n + " from the regionscan engine worker");
      }
      byte[] body = new byte[n];
      data.readFully(body);
      return JSON.readTree(body);
    }

    @Override
    public void close() throws IOException {
      socket.close();
    }
  }

  /** Send {@code request} (its secret and version added) and return the open exchange. */
  Exchange open(ObjectNode request) throws IOException {
    request.put("v", VERSION);
    request.put("secret", secret);
    byte[] body = JSON.writeValueAsBytes(request);
    Socket socket = new Socket(InetAddress.getLoopbackAddress(), port);
    socket.setTcpNoDelay(true);
    Exchange ex = new Exchange(socket);
    DataOutputStream out = new DataOutputStream(socket.getOutputStream());
    out.write(MAGIC);
    out.writeInt(body.length);
    out.write(body);
    out.flush();
    return ex;
  }

  /** Requests that only read (plan, count, describe): sending one again changes nothing. */
  private static final java.util.Set<String> READ_ONLY_OPS = java.util.Set.of("schema", "push", "plan", "count", "stats");

  /**
   * Whether the worker process has ended, waiting a moment for it: a worker killed just before a
   * request may still have accepted its connection (the kernel completes the handshake for a
   * listening socket) and the request then fails with "Connection reset", not "refused".
   */
  boolean ended() {
    return awaitExit(500);
  }

  /** Whether the worker process has ended within {@code millis} ms (true at once when it has). */
  boolean awaitExit(long millis) {
    try {
      return process.waitFor(millis, TimeUnit.MILLISECONDS);
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /**
   * A request answered by one JSON frame. An error the worker answered with is an {@link Answered}
   * of its one line; a worker that went away is an IOException naming its pid and log (a
   * {@link Refused} when the request may go to a new worker).
   */
  JsonNode call(ObjectNode request) throws IOException {
    String op = request.path("op").asText();
    JsonNode reply;
    try (Exchange ex = open(request)) {
      reply = ex.readFrame();
    } catch (java.net.ConnectException e) {
      String line = died("a " + op + " request", e);
      forget(this);
      throw new Refused(line);
    } catch (IOException e) {
      String line = died("a " + op + " request", e);  // before forget(), which ends a worker that only failed
      boolean dead = ended();
      forget(this);
      if (READ_ONLY_OPS.contains(op) && dead) {
        // the worker died with the request unanswered; a read-only request may go to a new one
        throw new Refused(line);
      }
      throw new IOException(line);
    }
    if (!reply.path("ok").asBoolean(false)) {
      throw new Answered(reply.path("error").asText("the regionscan engine worker gave no reason"));
    }
    return reply;
  }
}
