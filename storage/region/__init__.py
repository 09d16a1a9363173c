"""A region's lifecycle on disk: the region and its stores, manifests and their
framing, file pins and reader leases, row compaction and the bulk-load journal."""
