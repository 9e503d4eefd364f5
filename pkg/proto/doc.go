// Package proto implements the Apache Thrift binary, compact and JSON
// (TJSONProtocol) wire protocols, byte-compatible with Apache Thrift, for
// hatgen-generated code and the HatRPC runtime.
//
// JSON goes through the binary protocol (JSONCodec): a Struct writes
// binary, which is transcoded to JSON (binary values in padded base64,
// strings quoted as encoding/json quotes them, doubles in Go's shortest
// form, NaN and the infinities as quoted words, map keys quoted), and JSON
// is transcoded to binary for the Struct to read, a binary value's base64
// decoded when it is read as binary. So a Struct needs no JSON methods,
// and proto.JSON works wherever a Protocol is taken. The JSON reader takes
// what Apache's readers take (whitespace, quoted or bare numbers, padded
// or unpadded base64) and refuses unpaired UTF-16 surrogate escapes, as
// Apache's C++, Java and Python readers do (Apache's Go reader replaces
// them with U+FFFD). In JSON, MaxStringLength bounds a string's text and
// a binary value's decoded bytes.
//
// Writers (BinaryWriter, CompactWriter) append to a caller-owned buffer and
// never fail; readers (BinaryReader, CompactReader) decode from a []byte with
// bounds checks and Limits, so the hot path has no reflection, no interface
// dispatch per field and no allocations beyond the values the caller keeps
// (with Alias, binary values share the input; with UnsafeStrings, strings do
// too). Every decode failure matches ErrInvalidData through errors.Is, plus a
// finer sentinel (ErrTruncated, ErrSizeLimit, ErrDepthLimit, ErrBadVersion,
// ErrBadType, ErrNegativeSize, ErrInvalidVarint, ErrJSONSyntax).
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
