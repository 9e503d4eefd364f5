package generic

import (
	"context"
	"errors"
	"strings"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// Raw is a message body kept as the bytes of one Thrift struct, without
// an IDL: a proto.Struct for proxies. It decodes by copying the struct's
// bytes (checked by walking them, within the reader's limits) and encodes
// them unchanged in the same protocol; across protocols (a binary client,
// a compact backend) it re-encodes them value by value.
type Raw struct {
	Protocol proto.Protocol
	Bytes    []byte
	// Limits bound the walk when re-encoding; nil means proto.DefaultLimits.
	Limits *proto.Limits
}

func (r *Raw) lim() *proto.Limits {
	if r.Limits == nil {
		return &proto.DefaultLimits
	}
	return r.Limits
}

func (r *Raw) DecodeBinary(rd *proto.BinaryReader) error {
	w := proto.NewBinaryWriter(r.Bytes[:0])
	if err := copyStruct(rd, w, r.lim(), 0); err != nil {
		return err
	}
	r.Protocol, r.Bytes = proto.Binary, w.Bytes()
	return nil
}

func (r *Raw) DecodeCompact(rd *proto.CompactReader) error {
	w := proto.NewCompactWriter(r.Bytes[:0])
	if err := copyStruct(rd, w, r.lim(), 0); err != nil {
		return err
	}
	r.Protocol, r.Bytes = proto.Compact, w.Bytes()
	return nil
}

func (r *Raw) EncodeBinary(w *proto.BinaryWriter) error { return r.encode(w) }

func (r *Raw) EncodeCompact(w *proto.CompactWriter) error { return r.encode(w) }

func (r *Raw) encode(w writer) error {
	switch r.Protocol {
	case proto.Binary:
		return copyStruct(proto.NewBinaryReader(r.Bytes, r.lim()), w, r.lim(), 0)
	case proto.Compact:
		return copyStruct(proto.NewCompactReader(r.Bytes, r.lim()), w, r.lim(), 0)
	}
	return proto.ErrBadProtocol
}

// copyStruct reads one struct from rd and writes it to w, value by value:
// the writers keep no state across values but the compact field-id delta,
// which WriteFieldBegin maintains.
func copyStruct(rd reader, w writer, lim *proto.Limits, depth int) error {
	if depth > lim.MaxDepth {
		return &proto.DecodeError{Err: proto.ErrDepthLimit}
	}
	if err := rd.ReadStructBegin(); err != nil {
		return err
	}
	w.WriteStructBegin()
	for {
		t, id, err := rd.ReadFieldBegin()
		if err != nil {
			return err
		}
		if t == proto.STOP {
			break
		}
		w.WriteFieldBegin(t, id)
		if err := copyValue(rd, w, t, lim, depth+1); err != nil {
			return err
		}
	}
	if err := rd.ReadStructEnd(); err != nil {
		return err
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func copyValue(rd reader, w writer, t proto.Type, lim *proto.Limits, depth int) error {
	if depth > lim.MaxDepth {
		return &proto.DecodeError{Err: proto.ErrDepthLimit}
	}
	switch t {
	case proto.BOOL:
		v, err := rd.ReadBool()
		w.WriteBool(v)
		return err
	case proto.I8:
		v, err := rd.ReadI8()
		w.WriteI8(v)
		return err
	case proto.I16:
		v, err := rd.ReadI16()
		w.WriteI16(v)
		return err
	case proto.I32:
		v, err := rd.ReadI32()
		w.WriteI32(v)
		return err
	case proto.I64:
		v, err := rd.ReadI64()
		w.WriteI64(v)
		return err
	case proto.DOUBLE:
		v, err := rd.ReadDouble()
		w.WriteDouble(v)
		return err
	case proto.STRING:
		v, err := rd.ReadBinary()
		w.WriteBinary(v)
		return err
	case proto.UUID:
		v, err := rd.ReadUUID()
		w.WriteUUID(v)
		return err
	case proto.STRUCT:
		return copyStruct(rd, w, lim, depth)
	case proto.LIST, proto.SET:
		var et proto.Type
		var n int
		var err error
		if t == proto.SET {
			et, n, err = rd.ReadSetBegin()
			w.WriteSetBegin(et, n)
		} else {
			et, n, err = rd.ReadListBegin()
			w.WriteListBegin(et, n)
		}
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := copyValue(rd, w, et, lim, depth+1); err != nil {
				return err
			}
		}
		return nil
	case proto.MAP:
		kt, vt, n, err := rd.ReadMapBegin()
		if err != nil {
			return err
		}
		w.WriteMapBegin(kt, vt, n)
		for i := 0; i < n; i++ {
			if err := copyValue(rd, w, kt, lim, depth+1); err != nil {
				return err
			}
			if err := copyValue(rd, w, vt, lim, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return &proto.DecodeError{Err: proto.ErrBadType, Detail: t.String()}
}

// ErrNotMessage is returned by Forward for bytes that do not start a
// strict binary or compact Thrift message.
var ErrNotMessage = errors.New("generic: not a Thrift message")

// Forward sends one request message (unframed, binary or compact, as a
// Thrift client wrote it) to the server behind c and returns the reply
// message in the request's protocol with the request's seqid, without an
// IDL: a proxy's data path. An application exception from the backend is
// returned as an EXCEPTION reply message, not an error; errors are
// failures to reach the backend (the proxy answers those itself). A oneway
// request returns a nil reply. A method name "Service:method" is sent as
// method to c's service unless c multiplexes.
func Forward(ctx context.Context, c client.Caller, msg []byte) ([]byte, error) {
	return ForwardWithLimits(ctx, c, msg, nil)
}

// ForwardWithLimits is Forward with the limits the request is read with;
// nil means proto.DefaultLimits.
func ForwardWithLimits(ctx context.Context, c client.Caller, msg []byte, lim *proto.Limits) ([]byte, error) {
	var p proto.Protocol
	switch {
	case len(msg) >= 2 && msg[0] == 0x80 && msg[1] == 0x01:
		p = proto.Binary
	case len(msg) >= 1 && msg[0] == 0x82:
		p = proto.Compact
	default:
		return nil, ErrNotMessage
	}
	h, off, err := proto.DecodeMessageHeader(p, msg, lim)
	if err != nil {
		return nil, err
	}
	if h.Type != proto.Call && h.Type != proto.Oneway {
		return nil, ErrNotMessage
	}
	args := &Raw{Limits: lim}
	if err := proto.Unmarshal(p, msg[off:], lim, args); err != nil {
		return nil, err
	}
	m := &client.Method{Name: h.Name}
	if svc, name, ok := strings.Cut(h.Name, ":"); ok {
		m.Service, m.Name = svc, name
	}
	if h.Type == proto.Oneway {
		m.Oneway = true
		return nil, c.Call(ctx, m, args, nil)
	}
	res := &Raw{Limits: lim}
	err = c.Call(ctx, m, args, res)
	var ae *proto.ApplicationException
	switch {
	case errors.As(err, &ae):
		return proto.EncodeMessage(p, nil, h.Name, proto.Exception, h.SeqID, ae)
	case err != nil:
		return nil, err
	}
	return proto.EncodeMessage(p, nil, h.Name, proto.Reply, h.SeqID, res)
}

// Proxy returns s as a server.Service whose every function forwards its
// arguments' bytes to backend and answers with the backend's reply
// bytes, decoding neither (Raw): the IDL supplies only the function
// names, which are oneway, and the hints the server plans with.
func (s *Service) Proxy(backend client.Caller) *server.Service {
	out := &server.Service{Name: s.Name(), Hints: s.Hints}
	lim := &s.idl.lim
	for _, fn := range s.Functions() {
		m := &client.Method{Service: s.Name(), Name: fn.Name, Oneway: fn.Oneway, Hints: s.Hints.Function(fn.Name)}
		out.Methods = append(out.Methods, server.Method{
			Name:    fn.Name,
			Oneway:  fn.Oneway,
			Hints:   m.Hints,
			NewArgs: func() proto.Struct { return &Raw{Limits: lim} },
			Handle: func(ctx context.Context, a proto.Struct) (proto.Struct, error) {
				if m.Oneway {
					return nil, backend.Call(ctx, m, a, nil)
				}
				res := &Raw{Limits: lim}
				if err := backend.Call(ctx, m, a, res); err != nil {
					return nil, err
				}
				return res, nil
			},
		})
	}
	return out
}
