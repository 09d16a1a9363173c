package regionscan.spark;

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

  /** Bulk-load {@code data} into the table of {@code settings}: append, or replace its rows. */
  static void run(Dataset<Row> data, SourceSettings settings, boolean overwrite) {
    RegionScanBatchWrite job = RegionScanBatchWrite.begin(settings, data.schema(), overwrite);
    List<WriterCommitMessage> messages;
    try {
      messages = data.queryExecution().toRdd().toJavaRDD().mapPartitions(new StageTask(job.factory())).collect();
    } catch (RuntimeException e) {
      job.abort(new WriterCommitMessage[0]);
      throw e;
    }
    try {
      job.commit(messages.toArray(new WriterCommitMessage[0]));
    } catch (RuntimeException e) {
      job.abort(new WriterCommitMessage[0]);  // keeps the files of a commit that reached its journal
      throw e;
    }
  }
}
