// Package proto implements the Apache Thrift binary and compact wire
// protocols, byte-compatible with Apache Thrift, for hatgen-generated code
// and the HatRPC runtime.
//
// Writers (BinaryWriter, CompactWriter) append to a caller-owned buffer and
// never fail; readers (BinaryReader, CompactReader) decode from a []byte with
// bounds checks and Limits, so the hot path has no reflection, no interface
// dispatch per field and no allocations beyond the values the caller keeps
// (with Alias, binary values share the input; with UnsafeStrings, strings do
// too). Every decode failure matches ErrInvalidData through errors.Is, plus a
// finer sentinel (ErrTruncated, ErrSizeLimit, ErrDepthLimit, ErrBadVersion,
// ErrBadType, ErrNegativeSize, ErrInvalidVarint).
//
// Generated code implements Struct for each IDL struct. The runtime uses
// the message layer:
//
//	enc := new(proto.Encoder)                  // one per connection
//	out, err := enc.EncodeFramed(p, buf[:0], "add", proto.Call, seq, args)
//
//	dec := proto.NewDecoder(nil)
//	hdr, err := dec.Begin(p, msg)              // name, type, seqid
//	err = dec.ReadBody(args)                   // or dec.SkipBody()
//
// Finding a connection's encoding and the end of an unframed message is the
// runtime's (wire.Detect, wire.ReadMessage; docs/design/wire.md section 1).
// Non-strict binary: writers always write the strict header; readers also
// accept the old non-strict one in a message they are handed, but the
// runtime never detects a connection as non-strict binary.
package proto
