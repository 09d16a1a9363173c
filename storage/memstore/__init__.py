"""The in-memory write buffer of a store: the sorted cell segments writes land
in, their Arrow runs and read views, and the memstore's cell scanner."""
