// Package gogen shows hatgen driven by `go generate`; the generated package
// echo is checked in and TestGoGenerate regenerates and compares it.
package gogen

//go:generate go run github.com/hatrpc/hatrpc/cmd/hatgen generate -o . --go-package github.com/hatrpc/hatrpc/internal/codegen/testdata/gogen echo.thrift
