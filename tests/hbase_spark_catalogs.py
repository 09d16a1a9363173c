"""HBaseCatalogSuite's catalog (hbase-connectors), shared by the SerDe and the Spark suites."""

# map, array and struct columns with no SerDe of their own, in a binary catalog, as the suite writes it
CATALOG_SUITE = {
    "table": {"namespace": "default", "name": "htable"},
    "rowkey": "key1:key2",
    "columns": {
        "col1": {"cf": "rowkey", "col": "key1", "type": "string"},
        "col2": {"cf": "rowkey", "col": "key2", "type": "double"},
        "col3": {"cf": "cf1", "col": "col2", "type": "binary"},
        "col4": {"cf": "cf1", "col": "col3", "type": "timestamp"},
        "col5": {"cf": "cf1", "col": "col4", "type": "double",
                 "serdes": "org.apache.hadoop.hbase.spark.datasources.DoubleSerDes"},
        "col6": {"cf": "cf1", "col": "col5", "type": "MAP<int, struct<varchar:string>>"},
        "col7": {"cf": "cf1", "col": "col6", "type": "array<struct<tinYint:tinyint>>"},
        "col8": {"cf": "cf1", "col": "col7", "type": "MAp<int, ARRAY<double>>"},
        "col9": {"cf": "cf1", "col": "col8", "type": "date"},
        "col10": {"cf": "cf1", "col": "col9", "type": "timestamp"},
    },
}
