// regionscan's copy of the HBase Thrift 1 interface ("Hbase.thrift").
//
// The gateway (storage/thrift) serves this service so that HBase's Thrift 1
// clients, happybase first among them, talk to regionscan unchanged.  Type
// names, field ids, field types and method signatures must stay exactly as
// HBase defines them: they are the wire contract (one optional field is added,
// TCell.type, below; clients on HBase's IDL skip it).  Comments describe what
// regionscan's gateway does with each call (see docs/thrift.md).
//
// Interface version: HBase Thrift 1 as of HBase 0.98 - 2.x (the level
// happybase's compat="0.98" speaks).

namespace py hbase

typedef binary Text
typedef binary Bytes
typedef i32 ScannerID

// One version of one cell.  Field 3 is regionscan's one addition to HBase's
// interface: a raw scan's cells (scan attribute "_raw_", docs/thrift.md) carry
// their type code (4 Put, 8 Delete, 12 DeleteColumn, 14 DeleteFamily), as
// HBase's Thrift 2 TColumnValue.type does.  It is optional and sent only by
// raw scans, so HBase's own clients, which skip unknown fields, read every
// answer as before.
struct TCell {
  1: Bytes value,
  2: i64 timestamp,
  3: optional byte type
}

// A column family's settings.  name ends with ':' as HBase sends it.
struct ColumnDescriptor {
  1: Text name,
  2: i32 maxVersions = 3,
  3: string compression = "NONE",
  4: bool inMemory = 0,
  5: string bloomFilterType = "NONE",
  6: i32 bloomFilterVectorSize = 0,
  7: i32 bloomFilterNbHashes = 0,
  8: bool blockCacheEnabled = 0,
  9: i32 timeToLive = -1
}

// A region: its key range, id, name and the server that holds it.
struct TRegionInfo {
  1: Text startKey,
  2: Text endKey,
  3: i64 id,
  4: Text name,
  5: byte version,
  6: Text serverName,
  7: i32 port
}

// A put (isDelete false) or a delete of one column ("family:qualifier")
// or of a whole family ("family").
struct Mutation {
  1: bool isDelete = 0,
  2: Text column,
  3: Text value,
  4: bool writeToWAL = 1
}

// The mutations of one row.
struct BatchMutation {
  1: Text row,
  2: list<Mutation> mutations
}

// An increment of one counter column ("ammount" is HBase's own spelling).
struct TIncrement {
  1: Text table,
  2: Text row,
  3: Text column,
  4: i64 ammount
}

// A column name with its cell, for results in column order.
struct TColumn {
  1: Text columnName,
  2: TCell cell
}

// One row of a result: columns as a map, or sortedColumns when the scan
// asked for sorted columns.
struct TRowResult {
  1: Text row,
  2: optional map<Text, TCell> columns,
  3: optional list<TColumn> sortedColumns
}

// Everything a scanner can be opened with.
struct TScan {
  1: optional Text startRow,
  2: optional Text stopRow,
  3: optional i64 timestamp,
  4: optional list<Text> columns,
  5: optional i32 caching,
  6: optional Text filterString,
  7: optional i32 batchSize,
  8: optional bool sortColumns,
  9: optional bool reversed
}

// Values appended to columns of one row.
struct TAppend {
  1: Text table,
  2: Text row,
  3: list<Text> columns,
  4: list<Text> values
}

// A failure on the server side (missing or disabled table, I/O, limits).
exception IOError {
  1: string message
}

// A bad argument (unknown family, bad value, unknown scanner id).
exception IllegalArgument {
  1: string message
}

// createTable was given a name that already exists.
exception AlreadyExists {
  1: string message
}

service Hbase {
  // -- tables --------------------------------------------------------------
  void enableTable(1: Bytes tableName) throws (1: IOError io)
  void disableTable(1: Bytes tableName) throws (1: IOError io)
  bool isTableEnabled(1: Bytes tableName) throws (1: IOError io)
  void compact(1: Bytes tableNameOrRegionName) throws (1: IOError io)
  void majorCompact(1: Bytes tableNameOrRegionName) throws (1: IOError io)
  list<Text> getTableNames() throws (1: IOError io)
  map<Text, ColumnDescriptor> getColumnDescriptors(1: Text tableName) throws (1: IOError io)
  list<TRegionInfo> getTableRegions(1: Text tableName) throws (1: IOError io)
  void createTable(1: Text tableName, 2: list<ColumnDescriptor> columnFamilies)
    throws (1: IOError io, 2: IllegalArgument ia, 3: AlreadyExists exist)
  void deleteTable(1: Text tableName) throws (1: IOError io)

  // -- point reads -----------------------------------------------------------
  list<TCell> get(1: Text tableName, 2: Text row, 3: Text column,
                  4: map<Text, Text> attributes) throws (1: IOError io)
  list<TCell> getVer(1: Text tableName, 2: Text row, 3: Text column, 4: i32 numVersions,
                     5: map<Text, Text> attributes) throws (1: IOError io)
  list<TCell> getVerTs(1: Text tableName, 2: Text row, 3: Text column, 4: i64 timestamp,
                       5: i32 numVersions, 6: map<Text, Text> attributes) throws (1: IOError io)
  list<TRowResult> getRow(1: Text tableName, 2: Text row,
                          3: map<Text, Text> attributes) throws (1: IOError io)
  list<TRowResult> getRowWithColumns(1: Text tableName, 2: Text row, 3: list<Text> columns,
                                     4: map<Text, Text> attributes) throws (1: IOError io)
  list<TRowResult> getRowTs(1: Text tableName, 2: Text row, 3: i64 timestamp,
                            4: map<Text, Text> attributes) throws (1: IOError io)
  list<TRowResult> getRowWithColumnsTs(1: Text tableName, 2: Text row, 3: list<Text> columns,
                                       4: i64 timestamp, 5: map<Text, Text> attributes)
    throws (1: IOError io)
  list<TRowResult> getRows(1: Text tableName, 2: list<Text> rows,
                           3: map<Text, Text> attributes) throws (1: IOError io)
  list<TRowResult> getRowsWithColumns(1: Text tableName, 2: list<Text> rows, 3: list<Text> columns,
                                      4: map<Text, Text> attributes) throws (1: IOError io)
  list<TRowResult> getRowsTs(1: Text tableName, 2: list<Text> rows, 3: i64 timestamp,
                             4: map<Text, Text> attributes) throws (1: IOError io)
  list<TRowResult> getRowsWithColumnsTs(1: Text tableName, 2: list<Text> rows, 3: list<Text> columns,
                                        4: i64 timestamp, 5: map<Text, Text> attributes)
    throws (1: IOError io)

  // -- writes ----------------------------------------------------------------
  void mutateRow(1: Text tableName, 2: Text row, 3: list<Mutation> mutations,
                 4: map<Text, Text> attributes) throws (1: IOError io, 2: IllegalArgument ia)
  void mutateRowTs(1: Text tableName, 2: Text row, 3: list<Mutation> mutations, 4: i64 timestamp,
                   5: map<Text, Text> attributes) throws (1: IOError io, 2: IllegalArgument ia)
  void mutateRows(1: Text tableName, 2: list<BatchMutation> rowBatches,
                  3: map<Text, Text> attributes) throws (1: IOError io, 2: IllegalArgument ia)
  void mutateRowsTs(1: Text tableName, 2: list<BatchMutation> rowBatches, 3: i64 timestamp,
                    4: map<Text, Text> attributes) throws (1: IOError io, 2: IllegalArgument ia)
  i64 atomicIncrement(1: Text tableName, 2: Text row, 3: Text column, 4: i64 value)
    throws (1: IOError io, 2: IllegalArgument ia)
  void deleteAll(1: Text tableName, 2: Text row, 3: Text column,
                 4: map<Text, Text> attributes) throws (1: IOError io)
  void deleteAllTs(1: Text tableName, 2: Text row, 3: Text column, 4: i64 timestamp,
                   5: map<Text, Text> attributes) throws (1: IOError io)
  void deleteAllRow(1: Text tableName, 2: Text row,
                    3: map<Text, Text> attributes) throws (1: IOError io)
  void increment(1: TIncrement increment) throws (1: IOError io)
  void incrementRows(1: list<TIncrement> increments) throws (1: IOError io)
  void deleteAllRowTs(1: Text tableName, 2: Text row, 3: i64 timestamp,
                      4: map<Text, Text> attributes) throws (1: IOError io)

  // -- scanners --------------------------------------------------------------
  // The attributes "_raw_" and "_versions_" of any scannerOpen* call ask for a
  // raw scan, whose rows come as sortedColumns with TCell.type (docs/thrift.md).
  ScannerID scannerOpenWithScan(1: Text tableName, 2: TScan scan,
                                3: map<Text, Text> attributes) throws (1: IOError io)
  ScannerID scannerOpen(1: Text tableName, 2: Text startRow, 3: list<Text> columns,
                        4: map<Text, Text> attributes) throws (1: IOError io)
  ScannerID scannerOpenWithStop(1: Text tableName, 2: Text startRow, 3: Text stopRow,
                                4: list<Text> columns, 5: map<Text, Text> attributes)
    throws (1: IOError io)
  ScannerID scannerOpenWithPrefix(1: Text tableName, 2: Text startAndPrefix, 3: list<Text> columns,
                                  4: map<Text, Text> attributes) throws (1: IOError io)
  ScannerID scannerOpenTs(1: Text tableName, 2: Text startRow, 3: list<Text> columns,
                          4: i64 timestamp, 5: map<Text, Text> attributes) throws (1: IOError io)
  ScannerID scannerOpenWithStopTs(1: Text tableName, 2: Text startRow, 3: Text stopRow,
                                  4: list<Text> columns, 5: i64 timestamp,
                                  6: map<Text, Text> attributes) throws (1: IOError io)
  list<TRowResult> scannerGet(1: ScannerID id) throws (1: IOError io, 2: IllegalArgument ia)
  list<TRowResult> scannerGetList(1: ScannerID id, 2: i32 nbRows)
    throws (1: IOError io, 2: IllegalArgument ia)
  void scannerClose(1: ScannerID id) throws (1: IOError io, 2: IllegalArgument ia)

  // -- the rest of Thrift 1 --------------------------------------------------
  list<TCell> getRowOrBefore(1: Text tableName, 2: Text row, 3: Text family) throws (1: IOError io)
  TRegionInfo getRegionInfo(1: Text row) throws (1: IOError io)
  list<TCell> append(1: TAppend append) throws (1: IOError io)
  bool checkAndPut(1: Text tableName, 2: Text row, 3: Text column, 5: Text value, 6: Mutation mput,
                   7: map<Text, Text> attributes) throws (1: IOError io, 2: IllegalArgument ia)
}
