package fb303

// fb303.thrift is Apache Thrift's contrib/fb303/if/fb303.thrift unchanged,
// so any Thrift compiler's fb303 client (Python's, Java's, ...) calls it.
//go:generate go run github.com/hatrpc/hatrpc/cmd/hatgen generate -o gen --go-package github.com/hatrpc/hatrpc/pkg/fb303/gen fb303.thrift
