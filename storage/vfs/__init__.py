"""The file layer under every table: local and object-store filesystems, the
error-injecting filesystem of the fault tests, and a table's writer lease."""
