"""The engine worker: the Python half of the JVM source ``format("regionscan")``, and its jar build.

The JVM side (connector/java/src, :file:`WorkerProcess.java`) starts one
worker process per JVM (``python -m connector.engine_worker``) and sends it
requests over loopback (connector/java/PROTOCOL.md).  This package answers them:

* :mod:`.server` is the worker process's socket server (:class:`~.server.WorkerServer`);
* :mod:`.protocol` frames requests and replies;
* :mod:`.read_plan` is a read's plan, made once on the driver and carried by
  every task in one serialized form;
* :mod:`.read_ops` answers the JVM's schema, push, save, plan and read
  requests with the code the Python source uses (SourceConfig, push_filters,
  the input format, the record reader, the SerDe);
* :mod:`.aggregates`, :mod:`.aggregate_spec`, :mod:`.task_aggregates`,
  :mod:`.catalog` and :mod:`.writes` answer the other ops;
* :mod:`.build` compiles connector/java/src with ``javac`` into a cached jar.
"""

from .build import JvmSourceUnavailable, build_jar, jvm_source_jar, jvm_source_problem

__all__ = ["build_jar", "jvm_source_jar", "jvm_source_problem", "JvmSourceUnavailable"]
