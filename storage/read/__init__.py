"""The read paths over region views: Arrow batch scans, row scans and the row
merge, counting, late value materialization and happybase-style Python rows."""
