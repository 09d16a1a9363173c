"""The cell-at-a-time scanner stack.

Sources (memstore and store file scanners) follow the protocol in
:mod:`.protocol`; :mod:`.heap` merges them; :class:`StoreScanner` resolves
versions, deletes, TTL and the time range of one family;
:class:`RegionScanner` joins families into rows and applies the filter and
the result limits.  The walk over regions is the region runner's
(:class:`storage.read.region_runner.TableScanner`).
"""

from .list_scanner import ListScanner
from .heap import KeyValueHeap, ReversedKeyValueHeap, merge_scanners
from .metrics import ScanMetrics
from .protocol import CellScanner, next_row_key
from .region_scanner import RegionScanner, result_size
from .scan_spec import CellScanSpec
from .store_scanner import StoreScanner

__all__ = [
    "CellScanner",
    "ListScanner",
    "next_row_key",
    "KeyValueHeap",
    "ReversedKeyValueHeap",
    "merge_scanners",
    "ScanMetrics",
    "CellScanSpec",
    "StoreScanner",
    "RegionScanner",
    "result_size",
]
