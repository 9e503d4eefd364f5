package wire

import (
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// HelloMethod is the reserved method name of the capability handshake. A
// plain Thrift server does not know it and answers UNKNOWN_METHOD.
const HelloMethod = "__hatrpc_hello"

// Version is the HatRPC framing version this build speaks.
const Version = 1

// Capability bits exchanged in the handshake.
const (
	CapFraming uint64 = 1 << 0 // HatRPC framing over the current TCP connection
	CapRDMA    uint64 = 1 << 1 // calls may move to RDMA verbs lanes (ibv provider)
	CapSHM     uint64 = 1 << 2 // calls may move to shared-memory lanes (shm provider)
	CapAttach  uint64 = 1 << 3 // this connection becomes a lane's bootstrap and liveness link
	// CapHeaders: HatRPC frames on this connection may carry key/value
	// headers (FlagHeaders). A high bit, clear of the transport bits.
	CapHeaders uint64 = 1 << 16
)

// Hello is the handshake call's args struct:
// 1: i32 version, 2: i64 caps, 3: i32 max_frame, 4: string host,
// 5: Attach attach, 6: list<Attach> plans.
type Hello struct {
	Version  int32
	Caps     uint64
	MaxFrame int32
	// Host identifies the client's kernel (its boot id): shared memory is
	// only offered to a client on the same host.
	Host   string
	Attach *Attach // set with CapAttach
	// Plans are the client's plans (Function, ClientTransport,
	// ClientProtocol) for the functions it knows, for the server to check
	// against its own before any call; a conflict comes back in the reply.
	Plans []Attach
	// Windows: how much stream data the client receives before it
	// grants more (with CapStreams; zero: the defaults).
	Windows StreamWindows
}

// StreamWindows are the receive windows one side of a connection grants
// the other for streams: fields 7, 8 and 9 of Hello and HelloReply.
type StreamWindows struct {
	Messages int32 // per stream, messages
	Bytes    int32 // per stream, bytes
	Conn     int32 // per connection, bytes of all its streams
}

func (sw *StreamWindows) encode(w fieldWriter) {
	for i, v := range []int32{sw.Messages, sw.Bytes, sw.Conn} {
		if v != 0 {
			w.WriteFieldBegin(proto.I32, int16(7+i))
			w.WriteI32(v)
		}
	}
}

// decodeField reads field id (7, 8 or 9) into sw; false for other fields.
func (sw *StreamWindows) decodeField(r fieldReader, t proto.Type, id int16) (bool, error) {
	if t != proto.I32 || id < 7 || id > 9 {
		return false, nil
	}
	v, err := r.ReadI32()
	if err == nil && v < 0 {
		return true, fmt.Errorf("%w: negative stream window %d", proto.ErrInvalidData, v)
	}
	*[]*int32{&sw.Messages, &sw.Bytes, &sw.Conn}[id-7] = v
	return true, err
}

// Attach asks to turn the connection into one lane for a function:
// 1: string transport ("shm" or "rdma"), 2: string function
// ("Service:name"), 3: string client transport hint, 4: string client
// protocol hint, 5: i64 request size, 6: i64 response size (what the
// client expects: declared payload sizes or those seen so far; each side
// sizes the buffer it receives into from them). The server refuses (with
// an exception naming the function) a lane whose client plan cannot work
// with its own.
type Attach struct {
	Transport       string
	Function        string
	ClientTransport string
	ClientProtocol  string
	RequestSize     int64
	ResponseSize    int64
}

// HelloReply is the handshake's result struct: field 0 (success) holds
// 1: i32 version, 2: i64 caps (accepted), 3: string transport,
// 4: i32 max_frame, 5: string conflict_function, 6: string conflict.
type HelloReply struct {
	Version   int32
	Caps      uint64
	Transport string
	MaxFrame  int32
	// A plan of Hello.Plans the server cannot serve: the function and why.
	ConflictFunction, Conflict string
	// Windows: how much stream data the server receives before it
	// grants more (with CapStreams; zero: the defaults).
	Windows StreamWindows
	// FnWindows (field 10, with CapStreamWindows): the server's own
	// per-stream receive windows for the functions whose stream_window
	// hint sets one, by the name an open gives them.
	FnWindows []FnWindow
}

// FnWindow is one function's per-stream receive window: 1: string
// function ("Service:name" or the bare name), 2: i32 messages, 3: i32
// bytes.
type FnWindow struct {
	Function        string
	Messages, Bytes int32
}

// maxFnWindows bounds the windows a hello reply may list (hostile input).
const maxFnWindows = 1 << 16

func (f *FnWindow) encode(w fieldWriter) {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.STRING, 1)
	w.WriteString(f.Function)
	w.WriteFieldBegin(proto.I32, 2)
	w.WriteI32(f.Messages)
	w.WriteFieldBegin(proto.I32, 3)
	w.WriteI32(f.Bytes)
	w.WriteFieldStop()
	w.WriteStructEnd()
}

func (f *FnWindow) decode(r fieldReader) error {
	err := readFields(r, func(t proto.Type, id int16) (bool, error) {
		var err error
		switch {
		case id == 1 && t == proto.STRING:
			f.Function, err = r.ReadString()
		case id == 2 && t == proto.I32:
			f.Messages, err = r.ReadI32()
		case id == 3 && t == proto.I32:
			f.Bytes, err = r.ReadI32()
		default:
			return false, nil
		}
		return true, err
	})
	if err == nil && (f.Messages <= 0 || f.Bytes <= 0) {
		err = fmt.Errorf("%w: stream window of %d messages, %d bytes for %q", proto.ErrInvalidData, f.Messages, f.Bytes, f.Function)
	}
	return err
}

// fieldWriter is the method set both writers share.
type fieldWriter interface {
	WriteListBegin(et proto.Type, n int)
	WriteStructBegin()
	WriteStructEnd()
	WriteFieldBegin(t proto.Type, id int16)
	WriteFieldStop()
	WriteI32(v int32)
	WriteI64(v int64)
	WriteString(v string)
}

type fieldReader interface {
	ReadListBegin() (proto.Type, int, error)
	ReadStructBegin() error
	ReadStructEnd() error
	ReadFieldBegin() (proto.Type, int16, error)
	ReadI32() (int32, error)
	ReadI64() (int64, error)
	ReadString() (string, error)
	Skip(t proto.Type) error
}

func (h *Hello) encode(w fieldWriter) error {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.I32, 1)
	w.WriteI32(h.Version)
	w.WriteFieldBegin(proto.I64, 2)
	w.WriteI64(int64(h.Caps))
	w.WriteFieldBegin(proto.I32, 3)
	w.WriteI32(h.MaxFrame)
	if h.Host != "" {
		w.WriteFieldBegin(proto.STRING, 4)
		w.WriteString(h.Host)
	}
	if a := h.Attach; a != nil {
		w.WriteFieldBegin(proto.STRUCT, 5)
		a.encode(w)
	}
	if len(h.Plans) > 0 {
		w.WriteFieldBegin(proto.LIST, 6)
		w.WriteListBegin(proto.STRUCT, len(h.Plans))
		for i := range h.Plans {
			h.Plans[i].encode(w)
		}
	}
	h.Windows.encode(w)
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (a *Attach) encode(w fieldWriter) {
	w.WriteStructBegin()
	for i, v := range []string{a.Transport, a.Function, a.ClientTransport, a.ClientProtocol} {
		w.WriteFieldBegin(proto.STRING, int16(i+1))
		w.WriteString(v)
	}
	for i, v := range []int64{a.RequestSize, a.ResponseSize} {
		if v != 0 {
			w.WriteFieldBegin(proto.I64, int16(i+5))
			w.WriteI64(v)
		}
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
}

// MaxEncodedSize bounds a's size in a hello, binary or compact (compact
// takes less): four strings of 7 bytes and their text, two i64 fields of
// 11, a stop byte.
func (a *Attach) MaxEncodedSize() int {
	return 4*7 + 2*11 + 1 + len(a.Transport) + len(a.Function) + len(a.ClientTransport) + len(a.ClientProtocol)
}

// maxPlans bounds the plans a hello may carry (hostile input).
const maxPlans = 4096

func (a *Attach) decode(r fieldReader) error {
	return readFields(r, func(t proto.Type, id int16) (bool, error) {
		switch {
		case t == proto.STRING && id >= 1 && id <= 4:
			v, err := r.ReadString()
			*[]*string{&a.Transport, &a.Function, &a.ClientTransport, &a.ClientProtocol}[id-1] = v
			return true, err
		case t == proto.I64 && (id == 5 || id == 6):
			v, err := r.ReadI64()
			if v < 0 {
				return true, fmt.Errorf("%w: negative size %d in attach", proto.ErrInvalidData, v)
			}
			*[]*int64{&a.RequestSize, &a.ResponseSize}[id-5] = v
			return true, err
		}
		return false, nil
	})
}

func (h *Hello) decode(r fieldReader) error {
	*h = Hello{}
	return readFields(r, func(t proto.Type, id int16) (bool, error) {
		var err error
		switch {
		case id == 1 && t == proto.I32:
			h.Version, err = r.ReadI32()
		case id == 2 && t == proto.I64:
			var v int64
			v, err = r.ReadI64()
			h.Caps = uint64(v)
		case id == 3 && t == proto.I32:
			h.MaxFrame, err = r.ReadI32()
		case id == 4 && t == proto.STRING:
			h.Host, err = r.ReadString()
		case id == 5 && t == proto.STRUCT:
			h.Attach = &Attach{}
			err = h.Attach.decode(r)
		case id == 6 && t == proto.LIST:
			var et proto.Type
			var n int
			if et, n, err = r.ReadListBegin(); err != nil {
				return true, err
			}
			if et != proto.STRUCT || n > maxPlans {
				return true, fmt.Errorf("%w: hello plans: %d entries of type %v", proto.ErrInvalidData, n, et)
			}
			h.Plans = nil // an empty list is no list: it re-encodes as absent
			if n > 0 {
				h.Plans = make([]Attach, n)
			}
			for i := range h.Plans {
				if err = h.Plans[i].decode(r); err != nil {
					return true, err
				}
			}
		default:
			return h.Windows.decodeField(r, t, id)
		}
		return true, err
	})
}

// readFields runs a struct's field loop; field returns false for fields it
// does not know, which are skipped.
func readFields(r fieldReader, field func(t proto.Type, id int16) (bool, error)) error {
	if err := r.ReadStructBegin(); err != nil {
		return err
	}
	for {
		t, id, err := r.ReadFieldBegin()
		if err != nil {
			return err
		}
		if t == proto.STOP {
			return r.ReadStructEnd()
		}
		ok, err := field(t, id)
		if err != nil {
			return err
		}
		if !ok {
			if err := r.Skip(t); err != nil {
				return err
			}
		}
	}
}

// EncodeBinary implements proto.Struct.
func (h *Hello) EncodeBinary(w *proto.BinaryWriter) error { return h.encode(w) }

// EncodeCompact implements proto.Struct.
func (h *Hello) EncodeCompact(w *proto.CompactWriter) error { return h.encode(w) }

// DecodeBinary implements proto.Struct.
func (h *Hello) DecodeBinary(r *proto.BinaryReader) error { return h.decode(r) }

// DecodeCompact implements proto.Struct.
func (h *Hello) DecodeCompact(r *proto.CompactReader) error { return h.decode(r) }

func (h *HelloReply) encode(w fieldWriter) error {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.STRUCT, 0)
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.I32, 1)
	w.WriteI32(h.Version)
	w.WriteFieldBegin(proto.I64, 2)
	w.WriteI64(int64(h.Caps))
	w.WriteFieldBegin(proto.STRING, 3)
	w.WriteString(h.Transport)
	w.WriteFieldBegin(proto.I32, 4)
	w.WriteI32(h.MaxFrame)
	if h.Conflict != "" {
		w.WriteFieldBegin(proto.STRING, 5)
		w.WriteString(h.ConflictFunction)
		w.WriteFieldBegin(proto.STRING, 6)
		w.WriteString(h.Conflict)
	}
	h.Windows.encode(w)
	if len(h.FnWindows) > 0 {
		w.WriteFieldBegin(proto.LIST, 10)
		w.WriteListBegin(proto.STRUCT, len(h.FnWindows))
		for i := range h.FnWindows {
			h.FnWindows[i].encode(w)
		}
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (h *HelloReply) decode(r fieldReader) error {
	*h = HelloReply{}
	seen := false
	err := readFields(r, func(t proto.Type, id int16) (bool, error) {
		if id != 0 || t != proto.STRUCT {
			return false, nil
		}
		seen = true
		return true, readFields(r, func(t proto.Type, id int16) (bool, error) {
			var err error
			switch {
			case id == 1 && t == proto.I32:
				h.Version, err = r.ReadI32()
			case id == 2 && t == proto.I64:
				var v int64
				v, err = r.ReadI64()
				h.Caps = uint64(v)
			case id == 3 && t == proto.STRING:
				h.Transport, err = r.ReadString()
			case id == 4 && t == proto.I32:
				h.MaxFrame, err = r.ReadI32()
			case id == 5 && t == proto.STRING:
				h.ConflictFunction, err = r.ReadString()
			case id == 6 && t == proto.STRING:
				h.Conflict, err = r.ReadString()
			case id == 10 && t == proto.LIST:
				var et proto.Type
				var n int
				if et, n, err = r.ReadListBegin(); err != nil {
					return true, err
				}
				if et != proto.STRUCT || n > maxFnWindows {
					return true, fmt.Errorf("%w: hello reply stream windows: %d entries of type %v", proto.ErrInvalidData, n, et)
				}
				h.FnWindows = nil
				if n > 0 {
					h.FnWindows = make([]FnWindow, n)
				}
				for i := range h.FnWindows {
					if err = h.FnWindows[i].decode(r); err != nil {
						return true, err
					}
				}
			default:
				return h.Windows.decodeField(r, t, id)
			}
			return true, err
		})
	})
	if err == nil && !seen {
		return proto.NewApplicationException(proto.ExcMissingResult, "hello reply without result")
	}
	return err
}

// EncodeBinary implements proto.Struct.
func (h *HelloReply) EncodeBinary(w *proto.BinaryWriter) error { return h.encode(w) }

// EncodeCompact implements proto.Struct.
func (h *HelloReply) EncodeCompact(w *proto.CompactWriter) error { return h.encode(w) }

// DecodeBinary implements proto.Struct.
func (h *HelloReply) DecodeBinary(r *proto.BinaryReader) error { return h.decode(r) }

// DecodeCompact implements proto.Struct.
func (h *HelloReply) DecodeCompact(r *proto.CompactReader) error { return h.decode(r) }
