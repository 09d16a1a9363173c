"""The write-ahead log: its record format, writer, reader and replay, and the
log kept as immutable segment objects on object stores."""
