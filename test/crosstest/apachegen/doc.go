// Package apachegen holds Apache Thrift's own Go code (Debian's thrift
// 0.17 compiler) for the cross-language test IDL, the Apache Go client and
// server of the cross tests. Debian's compiler predates uuid, so it reads
// the corpus's v0.16 ThriftTest.thrift (the same IDL without testUuid and
// CrazyNesting.uuid_field), less the CrazyNesting.list_field line, which
// Apache's Go generator cannot map (a set as a map key) and which Apache's
// own Go cross test drops the same way. Checked in so that `go test` needs
// no thrift compiler; regenerate with `go generate ./test/crosstest/apachegen`.
package apachegen

//go:generate sh -c "d=$(mktemp -d) && grep -v 'list.*map.*list.*map' ../../../../shared/idl/apache/thrift/test/v0.16/ThriftTest.thrift > $d/ThriftTest.thrift && thrift --gen go:package_prefix=github.com/hatrpc/hatrpc/test/crosstest/apachegen/,skip_remote -out . $d/ThriftTest.thrift; rc=$?; rm -rf $d; exit $rc"
//go:generate gofmt -w thrifttest
