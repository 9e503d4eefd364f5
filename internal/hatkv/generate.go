// Package hatkv is HatKV, the key-value server of the HatRPC paper (§4.4):
// LMDB records (internal/hatkv/kvstore) served through the HatRPC service
// generated from hatkv.thrift. The server takes its storage configuration
// from the IDL's hints (see Config), so the same file that tunes the RPC
// engine tunes LMDB.
package hatkv

//go:generate go run github.com/hatrpc/hatrpc/cmd/hatgen generate -o gen --go-package github.com/hatrpc/hatrpc/internal/hatkv/gen hatkv.thrift
