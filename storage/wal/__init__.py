"""The write-ahead log: its record format, the writer (one file or rolling
segments, opened by :func:`~storage.wal.open_writer.open_wal_writer`), the reader,
replay and repair, and the Arrow decode of a run of records."""
