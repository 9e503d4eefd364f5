package generic

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/hatrpc/hatrpc/pkg/proto"
	hg "github.com/hatrpc/hatrpc/test/gen/interop"
	"github.com/hatrpc/hatrpc/test/testutil"
)

func fuzzSeeds(f *testing.F) {
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		for _, v := range []*hg.AllTypes{testutil.HatSample(), {I32v: 5}} {
			b, err := proto.Marshal(p, nil, &hg.InteropEchoAllArgs{V: v})
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(p), b)
		}
	}
	f.Add(uint8(proto.Binary), []byte{0x0c, 0, 1, 0x0f, 0, 10, 0x08, 0x7f, 0xff, 0xff, 0xff})
	f.Add(uint8(proto.Compact), []byte{0x1c, 0x1a, 0xf8, 0xff, 0xff, 0xff, 0x0f})
}

// FuzzServerArgs feeds hostile bytes to what a generic server decodes a
// call's arguments with: it never panics, fails exactly when the generated
// decoder fails, and whatever it accepts renders as JSON that encodes back
// (what the server's handler gets is always valid).
func FuzzServerArgs(f *testing.F) {
	fuzzSeeds(f)
	d, err := Load(filepath.Join(testutil.TestdataDir(), "interop.thrift"))
	if err != nil {
		f.Fatal(err)
	}
	svc, err := d.Service("Interop")
	if err != nil {
		f.Fatal(err)
	}
	fn, err := svc.Function("echoAll")
	if err != nil {
		f.Fatal(err)
	}
	sh := shapesOf(fn)
	lim := proto.DefaultLimits
	lim.MaxContainerSize = 1 << 12
	lim.MaxStringLength = 1 << 12
	f.Fuzz(func(t *testing.T, pb uint8, data []byte) {
		p := proto.Binary
		if pb%2 == 0 {
			p = proto.Compact
		}
		gen := &body{s: sh.args, lim: &lim, path: "args"}
		errG := proto.Unmarshal(p, data, &lim, gen)
		errH := proto.Unmarshal(p, data, &lim, &hg.InteropEchoAllArgs{})
		if (errG == nil) != (errH == nil) {
			t.Fatalf("generic: %v, generated: %v", errG, errH)
		}
		if errG != nil {
			return
		}
		js := appendJSON(nil, gen.out, structType(sh.args))
		v, err := parseJSON("args", js)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		back := &body{s: sh.args, lim: &lim, path: "args", in: v.(map[string]any)}
		if err := back.check(); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
	})
}

// FuzzRaw: a Raw body accepts what the reader accepts, and re-encodes in
// the other protocol to bytes that read back the same.
func FuzzRaw(f *testing.F) {
	fuzzSeeds(f)
	lim := proto.DefaultLimits
	lim.MaxContainerSize = 1 << 12
	f.Fuzz(func(t *testing.T, pb uint8, data []byte) {
		p, q := proto.Binary, proto.Compact
		if pb%2 == 0 {
			p, q = q, p
		}
		r := &Raw{Limits: &lim}
		if err := proto.Unmarshal(p, data, &lim, r); err != nil {
			return
		}
		other, err := proto.Marshal(q, nil, r)
		if err != nil {
			t.Fatal(err)
		}
		r2 := &Raw{Limits: &lim}
		if err := proto.Unmarshal(q, other, &lim, r2); err != nil {
			t.Fatal(err)
		}
		again, err := proto.Marshal(p, nil, r2)
		if err != nil {
			t.Fatal(err)
		}
		// Compact writes no key and value types for an empty map, so the
		// first trip may zero them; every later trip is exact.
		r3 := &Raw{Limits: &lim}
		if err := proto.Unmarshal(p, again, &lim, r3); err != nil {
			t.Fatalf("%x: %v", again, err)
		}
		other2, err := proto.Marshal(q, nil, r3)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(other2, other) {
			t.Fatalf("%x -> %x -> %x -> %x", r.Bytes, other, again, other2)
		}
	})
}
