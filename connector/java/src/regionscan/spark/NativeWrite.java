package regionscan.spark;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkJobInfo;
import org.apache.spark.SparkStageInfo;
import org.apache.spark.SparkStatusTracker;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

import java.util.Collections;
import java.util.Iterator;
import java.util.List;

/**
 * {@code df.write.format("regionscan")} once its SaveMode is decided
 * ({@link RegionScanProvider#createRelation}): the DataFrame's rows go, task by task, to each
 * executor's engine worker as Arrow ({@link TaskRowWriter}), and the driver commits every task's
 * staged files all or nothing ({@link RegionScanBatchWrite}); a failed job deletes what it staged.
 */
final class NativeWrite {
  private NativeWrite() {
  }

  /** One task: its rows staged, its commit message returned (a failed task abandons its files). */
  private static final class StageTask implements FlatMapFunction<Iterator<InternalRow>, WriterCommitMessage> {
    private static final long serialVersionUID = 1L;
    private final RegionScanBatchWrite.Factory factory;

    StageTask(RegionScanBatchWrite.Factory factory) {
      this.factory = factory;
    }

    @Override
    public Iterator<WriterCommitMessage> call(Iterator<InternalRow> rows) throws Exception {
      TaskContext ctx = TaskContext.get();
      DataWriter<InternalRow> writer = factory.createWriter(ctx.partitionId(), ctx.taskAttemptId());
      try {
        while (rows.hasNext()) {
          writer.write(rows.next());
        }
        WriterCommitMessage message = writer.commit();
        return Collections.singletonList(message).iterator();
      } catch (Exception e) {
        writer.abort();
        throw e;
      } finally {
        writer.close();
      }
    }
  }

  /**
   * Bulk-load {@code data} into the table of {@code settings}: append, or replace its rows.
   *
   * Any failure aborts the job before it is rethrown, whatever its type: a task lost to its
   * worker's death reaches the driver as a (checked) SparkException, not a RuntimeException, and
   * must delete what the job staged too. A failure that is not already one line (a lost executor,
   * an error of Spark's own) is made one, naming the table, with the original kept as its cause.
   */
  static void run(Dataset<Row> data, SourceSettings settings, boolean overwrite) {
    run(data, settings, overwrite, com.fasterxml.jackson.databind.node.MissingNode.getInstance());
  }

  /**
   * As {@link #run(Dataset, SourceSettings, boolean)}; where the SaveMode's {@code decision} asks
   * for a key {@code sample} (a table the write creates with {@code newtable} regions), the
   * DataFrame's keys are sampled first ({@link KeySample}) so the table splits where its rows are.
   */
  static void run(Dataset<Row> data, SourceSettings settings, boolean overwrite,
      com.fasterxml.jackson.databind.JsonNode decision) {
    KeySample sample = KeySample.take(data, decision);
    RegionScanBatchWrite job = RegionScanBatchWrite.begin(settings, data.schema(), overwrite, req -> {
      if (sample != null) {
        sample.addTo(req);
      }
    });
    if (sample != null && job.cutRows != null) {
      data = sample.byRegion(data, job.cutRows);  // each new region's rows from one task, in key order
    }
    SparkContext sc = data.sparkSession().sparkContext();
    String tag = "regionscan-write-" + job.job;
    List<WriterCommitMessage> messages;
    sc.addJobTag(tag);  // a tag, not a job group: the user's group and description stay as they are
    try {
      messages = data.queryExecution().toRdd().toJavaRDD().mapPartitions(new StageTask(job.factory())).collect();
    } catch (Throwable failure) {
      // Spark fails the job at its first failed task while others may still be staging: the
      // abort waits for them, so nothing they write lands after it (or in a table it dropped)
      awaitTasks(sc, tag);
      throw abortAfter(job, failure);
    } finally {
      sc.removeJobTag(tag);
    }
    try {
      job.commit(messages.toArray(new WriterCommitMessage[0]));
    } catch (Throwable failure) {
      throw abortAfter(job, failure);  // the abort keeps the files of a commit that reached its journal
    }
  }

  /** How long an abort waits for the failed job's other tasks to end (they are being cancelled). */
  private static final long TASK_WAIT_MS = 60_000;

  /** Wait until no task of the jobs tagged {@code tag} runs (or {@link #TASK_WAIT_MS} passed). */
  private static void awaitTasks(SparkContext sc, String tag) {
    SparkStatusTracker tracker = sc.statusTracker();
    long deadline = System.currentTimeMillis() + TASK_WAIT_MS;
    while (System.currentTimeMillis() < deadline) {
      boolean running = false;
      for (int jobId : tracker.getJobIdsForTag(tag)) {
        scala.Option<SparkJobInfo> info = tracker.getJobInfo(jobId);
        if (info.isEmpty()) {
          continue;
        }
        for (int stageId : info.get().stageIds()) {
          scala.Option<SparkStageInfo> stage = tracker.getStageInfo(stageId);
          running |= stage.isDefined() && stage.get().numActiveTasks() > 0;
        }
      }
      if (!running) {
        return;
      }
      try {
        Thread.sleep(50);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  private static RuntimeException abortAfter(RegionScanBatchWrite job, Throwable failure) {
    try {
      job.abort(new WriterCommitMessage[0]);
    } catch (RuntimeException abortFailed) {
      failure.addSuppressed(abortFailed);
    }
    if (failure instanceof Error) {
      throw (Error) failure;
    }
    if (EngineFailure.is(failure) || failure instanceof IllegalArgumentException) {
      throw EngineFailure.<RuntimeException>rethrow(failure);  // already one line
    }
    String text = String.valueOf(failure.getMessage()).strip();
    String first = text.isEmpty() ? failure.getClass().getName() : text.lines().findFirst().orElse(text);
    throw EngineFailure.raise("the bulk load into " + job.settings.tableName() + " failed and was rolled back: "
        + first, failure);
  }
}
