// Package echo is the "Your first service" example (see README.md): an
// echo service described in echo.thrift with HatRPC hints, Go code generated
// by hatgen into gen/echo, and the server and client programs in server/
// and client/.
package echo

//go:generate go run github.com/hatrpc/hatrpc/cmd/hatgen generate -o gen echo.thrift
