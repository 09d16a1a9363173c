"""The HBase Thrift 1 service, loaded once from the IDL file beside this module.

``hbase`` is the thriftpy2 module built from ``Hbase.thrift``: its structs
(``TCell``, ``TRowResult``, ``TScan``...), exceptions (``IOError``,
``IllegalArgument``, ``AlreadyExists``) and the ``Hbase`` service.  The
module name is the project's own, so it never clashes with the copy a
client library such as happybase loads in the same process.
"""

from __future__ import annotations

import os

import thriftpy2

__all__ = ["IDL_PATH", "hbase"]

IDL_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Hbase.thrift")

hbase = thriftpy2.load(IDL_PATH, module_name="regionscan_hbase_thrift")
