package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// What refusing a reply far past its room costs (issue 43): a handler's
// result 32 times the 1 MiB room, refused, against one reply at the room
// sent. Binary and compact count the whole size past the room (lengths
// added, no value read or copied); JSON stops at the room ("more than").
// Before: JSON built its whole reply (limit 0 here) and was refused
// after; "whole" rows are that.

const benchRoom = 1 << 20

// benchResult is field 0: list<string> of 1 KiB strings written one by
// one, or list<i64> written in bulk, as generated code writes them.
type benchResult struct {
	strs []string
	i64s []int64
}

func (r *benchResult) write(w interface {
	WriteStructBegin()
	WriteFieldBegin(t proto.Type, id int16)
	WriteListBegin(elem proto.Type, n int)
	WriteString(v string)
	WriteI64s(v []int64)
	WriteFieldStop()
	WriteStructEnd()
}) error {
	w.WriteStructBegin()
	if r.strs != nil {
		w.WriteFieldBegin(proto.LIST, 0)
		w.WriteListBegin(proto.STRING, len(r.strs))
		for _, s := range r.strs {
			w.WriteString(s)
		}
	} else {
		w.WriteFieldBegin(proto.LIST, 0)
		w.WriteListBegin(proto.I64, len(r.i64s))
		w.WriteI64s(r.i64s)
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (r *benchResult) EncodeBinary(w *proto.BinaryWriter) error   { return r.write(w) }
func (r *benchResult) EncodeCompact(w *proto.CompactWriter) error { return r.write(w) }
func (r *benchResult) DecodeBinary(*proto.BinaryReader) error     { return errors.New("unused") }
func (r *benchResult) DecodeCompact(*proto.CompactReader) error   { return errors.New("unused") }

func benchResults(times, i64Times int) map[string]*benchResult {
	s := strings.Repeat("k", 1024)
	strs := make([]string, times*benchRoom/1024)
	for i := range strs {
		strs[i] = s
	}
	i64s := make([]int64, i64Times*benchRoom/8)
	for i := range i64s {
		i64s[i] = int64(i) * 7919
	}
	return map[string]*benchResult{"strings": {strs: strs}, "i64s": {i64s: i64s}}
}

func BenchmarkReplyRefusal(b *testing.B) {
	past := benchResults(32, 32)
	// 1 GB of strings (one string's bytes shared: the handler's
	// result costs only its headers here).
	huge := benchResults(1024, 0)["strings"]
	protos := []proto.Protocol{proto.Binary, proto.Compact, proto.JSON}
	for _, shape := range []string{"strings", "i64s"} {
		for _, p := range protos {
			run := func(name string, r *benchResult, limit int, wantErr bool) {
				b.Run(shape+"/"+p.String()+"/"+name, func(b *testing.B) {
					codec := wire.GetCodec()
					defer wire.PutCodec(codec)
					buf := make([]byte, 0, 4096)
					b.ReportAllocs()
					for b.Loop() {
						codec.SetLimit(limit)
						out, err := codec.AppendMessage(buf[:0], p, "scan", proto.Reply, 1, r)
						if (err != nil) != wantErr {
							b.Fatalf("err %v", err)
						}
						if cap(out) <= 2*benchRoom {
							buf = out[:0]
						}
					}
				})
			}
			// A reply that fits: at about the room (the list a bit
			// smaller so that its JSON fits too).
			fit := benchResults(1, 1)[shape]
			if fit.strs != nil {
				fit.strs = fit.strs[:len(fit.strs)*2/3]
			} else {
				fit.i64s = fit.i64s[:len(fit.i64s)/4]
			}
			run("fits", fit, benchRoom, false)
			run("refused-32x", past[shape], benchRoom, true)
			if shape == "strings" {
				run("refused-1024x", huge, benchRoom, true)
			}
			if p == proto.JSON {
				run("whole-32x", past[shape], 0, false)
			}
		}
	}
}
