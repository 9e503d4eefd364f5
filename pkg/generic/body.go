package generic

import (
	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// shapes holds the synthetic structs Thrift wraps a function's arguments
// and result in: args (the arguments as fields) and result (field 0
// "success" for a non-void return, then the declared exceptions).
type shapes struct {
	fn     *idl.Function
	args   *idl.Struct
	result *idl.Struct
	void   bool
}

func shapesOf(fn *idl.Function) *shapes {
	sh := &shapes{fn: fn}
	sh.args = &idl.Struct{Name: fn.Name + "_args", Fields: fn.Args}
	res := &idl.Struct{Name: fn.Name + "_result"}
	rt := fn.Returns
	if rt == nil || rt.TrueType().Kind == idl.KindVoid {
		sh.void = true
	} else {
		res.Fields = append(res.Fields, &idl.Field{ID: 0, Name: "success", Type: rt, Req: idl.Optional})
	}
	for _, f := range fn.Throws {
		cp := *f
		cp.Req = idl.Optional // a result carries at most one of them
		res.Fields = append(res.Fields, &cp)
	}
	sh.result = res
	return sh
}

// structType wraps s as a type, for appendJSON.
func structType(s *idl.Struct) *idl.Type {
	return &idl.Type{Kind: idl.KindStruct, Name: s.Name, Struct: s}
}

// body is a dynamic proto.Struct: it encodes in from the IDL's types and
// decodes into out.
type body struct {
	s    *idl.Struct
	lim  *proto.Limits
	path string
	in   map[string]any
	out  map[string]any
	// throws is set on result bodies: ThrownException reports the declared
	// exception out carries, for the server's metrics.
	throws []*idl.Field
	b64    map[string][]byte // see encoder.b64
	borrow bool              // see decoder.borrow
}

func (b *body) EncodeBinary(w *proto.BinaryWriter) error {
	return (&encoder{w: w, lim: b.lim, b64: b.b64}).structFields(b.s, b.in, b.path, 0)
}

func (b *body) EncodeCompact(w *proto.CompactWriter) error {
	return (&encoder{w: w, lim: b.lim, b64: b.b64}).structFields(b.s, b.in, b.path, 0)
}

func (b *body) DecodeBinary(r *proto.BinaryReader) (err error) {
	b.out, err = (&decoder{r: r, lim: b.lim, borrow: b.borrow}).structFields(b.s, 0)
	return err
}

func (b *body) DecodeCompact(r *proto.CompactReader) (err error) {
	b.out, err = (&decoder{r: r, lim: b.lim, borrow: b.borrow}).structFields(b.s, 0)
	return err
}

// check encodes in once, to report a value that does not match the IDL
// before anything is sent.
func (b *body) check() error {
	b.b64 = map[string][]byte{}
	return (&encoder{w: nullWriter{}, lim: b.lim, b64: b.b64}).structFields(b.s, b.in, b.path, 0)
}

// ThrownException names the declared exception the result carries.
func (b *body) ThrownException() string {
	m := b.in
	if m == nil {
		m = b.out
	}
	for _, f := range b.throws {
		if _, ok := m[f.Name]; ok {
			return f.Type.TrueType().Name
		}
	}
	return ""
}

var (
	_ proto.Struct  = (*body)(nil)
	_ proto.Thrower = (*body)(nil)
)
