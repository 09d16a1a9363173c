"""A table and its connection: the happybase-style API, mutation batches and
the parallel scanner over a table's regions."""
