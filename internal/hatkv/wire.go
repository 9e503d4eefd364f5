package hatkv

import (
	"context"
	"errors"
	"io"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv/hatkvserver"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// WireStore is a Store that also reads records in their wire form (a
// Thrift binary map<string, binary>, see kvstore.AppendWire); a Service on
// one answers Get, MultiGet and Scan by splicing those bytes into the
// reply instead of decoding each record into a map and encoding it again.
// *kvstore.Store implements it.
type WireStore interface {
	GetWire(ctx context.Context, key string, fields []string, dst []byte) ([]byte, error)
	MultiGetWire(ctx context.Context, keys []string, fields []string) ([][]byte, error)
	ScanWire(ctx context.Context, startKey string, count int, fields []string) ([]kvstore.WireKV, bool, error)
	ScanStreamWire(ctx context.Context, r kvstore.ScanRange, send func([]kvstore.WireKV) error) error
}

var _ WireStore = (*kvstore.Store)(nil)

// Register registers the HatKV service of svc on rpc. It is the generated
// RegisterHatKV with one difference: when the store is a WireStore, Get,
// MultiGet and Scan reply with the stored bytes. The reply is the same
// on the wire (a map's entries in name order), for every transport and
// both protocols (compact replies are transcoded field by field).
func Register(rpc *server.Server, svc *Service) {
	ws, _ := svc.store.(WireStore)
	if ws == nil {
		hatkvserver.RegisterHatKV(rpc, svc)
		return
	}
	rpc.Register(wireService(ws, svc))
}

// wireService is the generated service description with Get, MultiGet
// and Scan answered from ws. TestWireServiceMatchesIDL keeps it in step
// with the IDL.
func wireService(ws WireStore, svc *Service) *server.Service {
	h := &hatkv.HatKVHints
	return &server.Service{Name: "HatKV", Hints: h, Methods: []server.Method{
		{Name: "Get", NewArgs: func() proto.Struct { return hatkv.NewHatKVGetArgs() }, Hints: h.Function("Get"),
			Handle: handle(func(ctx context.Context, a *hatkv.HatKVGetArgs) (proto.Struct, error) {
				rec, err := ws.GetWire(ctx, a.Key, a.Fields, nil)
				if err != nil {
					res := hatkv.NewHatKVGetResult()
					return declared(res, mapError(err, a.Key), &res.Bad, &res.Missing)
				}
				return &wireResult{kind: wireGet, rec: rec}, nil
			})},
		{Name: "Put", NewArgs: func() proto.Struct { return hatkv.NewHatKVPutArgs() }, Hints: h.Function("Put"),
			Handle: handle(func(ctx context.Context, a *hatkv.HatKVPutArgs) (proto.Struct, error) {
				res := hatkv.NewHatKVPutResult()
				return declared(res, svc.Put(ctx, a.Key, a.Fields), &res.Bad, &res.Full)
			})},
		{Name: "Delete", NewArgs: func() proto.Struct { return hatkv.NewHatKVDeleteArgs() }, Hints: h.Function("Delete"),
			Handle: handle(func(ctx context.Context, a *hatkv.HatKVDeleteArgs) (proto.Struct, error) {
				res := hatkv.NewHatKVDeleteResult()
				return declared(res, svc.Delete(ctx, a.Key), &res.Bad, &res.Missing, &res.Full)
			})},
		{Name: "MultiGet", NewArgs: func() proto.Struct { return hatkv.NewHatKVMultiGetArgs() }, Hints: h.Function("MultiGet"),
			Handle: handle(func(ctx context.Context, a *hatkv.HatKVMultiGetArgs) (proto.Struct, error) {
				recs, err := ws.MultiGetWire(ctx, a.Keys, a.Fields)
				if err != nil {
					res := hatkv.NewHatKVMultiGetResult()
					return declared(res, mapError(err, ""), &res.Bad)
				}
				return &wireResult{kind: wireMultiGet, lookups: recs}, nil
			})},
		{Name: "MultiPut", NewArgs: func() proto.Struct { return hatkv.NewHatKVMultiPutArgs() }, Hints: h.Function("MultiPut"),
			Handle: handle(func(ctx context.Context, a *hatkv.HatKVMultiPutArgs) (proto.Struct, error) {
				res := hatkv.NewHatKVMultiPutResult()
				return declared(res, svc.MultiPut(ctx, a.Records), &res.Bad, &res.Full)
			})},
		{Name: "Scan", NewArgs: func() proto.Struct { return hatkv.NewHatKVScanArgs() }, Hints: h.Function("Scan"),
			Handle: handle(func(ctx context.Context, a *hatkv.HatKVScanArgs) (proto.Struct, error) {
				rctx, room := scanRoom(ctx)
				kvs, cut, err := ws.ScanWire(rctx, a.StartKey, int(a.Count), a.Fields)
				if err != nil {
					res := hatkv.NewHatKVScanResult()
					return declared(res, mapError(err, a.StartKey), &res.Bad)
				}
				if cut {
					markScanCut(ctx, *room)
				}
				return &wireResult{kind: wireScan, scan: kvs}, nil
			})},
		{Name: "ScanStream", Hints: h.Function("ScanStream"), Stream: stream.Server,
			HandleStream: func(ctx context.Context, s server.ServerStream) (proto.Struct, error) {
				req := hatkv.NewScanRequest()
				if err := s.RecvMsg(req); err != nil {
					if err == io.EOF {
						err = &proto.ApplicationException{Type: proto.ExcProtocolError, Message: "HatKV.ScanStream: the client closed the stream before its request"}
					}
					return nil, err
				}
				// One message reused: SendMsg has encoded it when it returns.
				msg := &wireResult{kind: wireBatch}
				err := ws.ScanStreamWire(ctx, scanRange(req), func(kvs []kvstore.WireKV) error {
					msg.scan = kvs
					return s.SendMsg(msg)
				})
				if err != nil {
					res := hatkv.NewHatKVScanStreamResult()
					return declared(res, mapError(err, req.StartKey), &res.Bad)
				}
				return nil, nil
			}},
		{Name: "Stats", NewArgs: func() proto.Struct { return hatkv.NewHatKVStatsArgs() }, Hints: h.Function("Stats"),
			Handle: handle(func(ctx context.Context, _ *hatkv.HatKVStatsArgs) (proto.Struct, error) {
				st, err := svc.Stats(ctx)
				if err != nil {
					return nil, err
				}
				res := hatkv.NewHatKVStatsResult()
				res.Success = st
				return res, nil
			})},
	}}
}

func handle[A proto.Struct](fn func(ctx context.Context, a A) (proto.Struct, error)) server.Handler {
	return func(ctx context.Context, a proto.Struct) (proto.Struct, error) { return fn(ctx, a.(A)) }
}

// declared puts err into res's field of its declared exception type, as
// the generated handlers do; an undeclared error stays an error (the
// client gets an application exception).
func declared[R proto.Struct](res R, err error, fields ...any) (proto.Struct, error) {
	if err == nil {
		return res, nil
	}
	for _, f := range fields {
		if errors.As(err, f) {
			return res, nil
		}
	}
	return nil, err
}

// wireResult is the reply of a wire-form Get (rec), MultiGet (lookups:
// one per key, nil when missing) or Scan (scan), or one ScanStream
// message (scan). It is only ever encoded.
type wireResult struct {
	kind    wireKind
	rec     []byte
	lookups [][]byte
	scan    []kvstore.WireKV
}

type wireKind uint8

const (
	wireGet wireKind = iota
	wireMultiGet
	wireScan
	wireBatch // a ScanBatch: its records are field 1
)

// emptyWireMap is the wire form of an empty record.
var emptyWireMap = []byte{byte(proto.STRING), byte(proto.STRING), 0, 0, 0, 0}

var errEncodeOnly = errors.New("hatkv: a wire-form reply is only encoded")

func (r *wireResult) DecodeBinary(*proto.BinaryReader) error   { return errEncodeOnly }
func (r *wireResult) DecodeCompact(*proto.CompactReader) error { return errEncodeOnly }

// EncodeBinary splices the stored bytes in: they are already the binary
// protocol's map encoding; but for TJSONProtocol, which must see each
// value (binary, so base64) and name (a string).
func (r *wireResult) EncodeBinary(w *proto.BinaryWriter) error {
	if w.SplitsBinary() {
		return r.encodeFields(w, func(name []byte) { w.WriteString(string(name)) })
	}
	r.encode(w, func(b []byte) { w.Reset(append(w.Bytes(), b...)) })
	return nil
}

// EncodeCompact transcodes the stored maps field by field (compact
// lengths are varints); still no Record map is built.
func (r *wireResult) EncodeCompact(w *proto.CompactWriter) error {
	// A name is the same bytes as a string or as binary, and WriteBinary
	// takes them without a copy.
	return r.encodeFields(w, func(name []byte) { w.WriteBinary(name) })
}

// fieldWriter is what encodeFields needs of a writer.
type fieldWriter interface {
	structWriter
	WriteMapBegin(key, val proto.Type, n int)
	WriteBinary(v []byte)
}

// encodeFields writes each stored map field by field, names through
// name.
func (r *wireResult) encodeFields(w fieldWriter, name func([]byte)) error {
	var err error
	r.encode(w, func(wire []byte) {
		w.WriteMapBegin(proto.STRING, proto.STRING, kvstore.WireCount(wire))
		err = errors.Join(err, kvstore.WireFields(wire, func(n, val []byte) {
			name(n)
			w.WriteBinary(val)
		}))
	})
	return err
}

// structWriter is what encode needs of either protocol's writer.
type structWriter interface {
	WriteStructBegin()
	WriteStructEnd()
	WriteFieldBegin(t proto.Type, id int16)
	WriteFieldStop()
	WriteListBegin(elem proto.Type, n int)
	WriteString(v string)
	WriteBool(v bool)
}

// encode writes the result struct around the stored maps; record writes
// one stored map in w's protocol.
func (r *wireResult) encode(w structWriter, record func([]byte)) {
	w.WriteStructBegin()
	switch r.kind {
	case wireGet:
		w.WriteFieldBegin(proto.MAP, 0)
		record(r.rec)
	case wireScan, wireBatch:
		id := int16(0) // a result's success field
		if r.kind == wireBatch {
			id = 1 // ScanBatch.records
		}
		w.WriteFieldBegin(proto.LIST, id)
		w.WriteListBegin(proto.STRUCT, len(r.scan))
		for _, kv := range r.scan {
			w.WriteStructBegin()
			w.WriteFieldBegin(proto.STRING, 1)
			w.WriteString(kv.Key)
			w.WriteFieldBegin(proto.MAP, 2)
			record(kv.Wire)
			w.WriteFieldStop()
			w.WriteStructEnd()
		}
	default:
		w.WriteFieldBegin(proto.LIST, 0)
		w.WriteListBegin(proto.STRUCT, len(r.lookups))
		for _, rec := range r.lookups {
			w.WriteStructBegin()
			w.WriteFieldBegin(proto.BOOL, 1)
			w.WriteBool(rec != nil)
			w.WriteFieldBegin(proto.MAP, 2)
			if rec == nil {
				rec = emptyWireMap
			}
			record(rec)
			w.WriteFieldStop()
			w.WriteStructEnd()
		}
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
}
