// Package tpch runs TPC-H on DuckDB behind a HiveServer2-compatible SQL
// service (Apache Hive's TCLIService.thrift, served by hatgen-generated
// code), so that standard HiveServer2 clients (impyla, PyHive, gohive)
// query it over plain Thrift and HatRPC clients over TCP or shm lanes.
// It is a module of its own so that users of the framework never
// download DuckDB.
package tpch

//go:generate go tool hatgen generate -o gen idl/TCLIService.thrift idl/hs2.thrift idl/exchange_base.thrift idl/exchange.thrift
//go:generate sh -c "rm -rf apachegen && mkdir apachegen && thrift --gen go:package_prefix=github.com/hatrpc/hatrpc/tpch/apachegen/,skip_remote -out apachegen idl/exchange_base.thrift && gofmt -w apachegen"
