"""The Python half of the JVM source ``format("regionscan")``: the engine worker and the jar build.

* :mod:`.requests` answers the JVM's plan, push, count and read requests
  with the code the Python source uses (SourceConfig, push_filters, the
  input format, the record reader, the SerDe);
* :mod:`.protocol` frames requests and replies (connector/jvm/PROTOCOL.md);
* :mod:`.worker` is the long-lived process a JVM starts
  (``python -m connector.engine_worker``);
* :mod:`.build` compiles connector/jvm/src with ``javac`` into a cached jar.
"""

from .build import JvmSourceUnavailable, build_jar, jvm_source_jar, jvm_source_problem

__all__ = ["build_jar", "jvm_source_jar", "jvm_source_problem", "JvmSourceUnavailable"]
