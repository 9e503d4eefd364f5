package proto_test

import (
	"context"
	"syscall"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// workload pairs one value with its Apache encoder/decoder.
type workload struct {
	name  string
	val   proto.Struct
	fresh func() proto.Struct
	apW   func(context.Context, thrift.TProtocol) error
	apR   func(context.Context, thrift.TProtocol) error
}

func workloads() []workload {
	ym, yl := newYCSB()
	mx := newMixed()
	il := newI64List()
	return []workload{
		{"YCSBMap", ym, func() proto.Struct { return new(YCSBMap) },
			func(c context.Context, p thrift.TProtocol) error { return apYCSBMapWrite(c, p, ym) },
			func(c context.Context, p thrift.TProtocol) error { return apYCSBMapRead(c, p, new(YCSBMap)) }},
		{"YCSBList", yl, func() proto.Struct { return new(YCSBList) },
			func(c context.Context, p thrift.TProtocol) error { return apYCSBListWrite(c, p, yl) },
			func(c context.Context, p thrift.TProtocol) error { return apYCSBListRead(c, p, new(YCSBList)) }},
		{"Mixed20", mx, func() proto.Struct { return new(Mixed) },
			func(c context.Context, p thrift.TProtocol) error { return apMixedWrite(c, p, mx) },
			func(c context.Context, p thrift.TProtocol) error { return apMixedRead(c, p, new(Mixed)) }},
		{"I64List1000", il, func() proto.Struct { return new(I64List) },
			func(c context.Context, p thrift.TProtocol) error { return apI64ListWrite(c, p, il) },
			func(c context.Context, p thrift.TProtocol) error { return apI64ListRead(c, p, new(I64List)) }},
	}
}

// TestWorkloadsCross checks the benchmark workloads are wire-identical with
// Apache (YCSBMap only by value: map order is random) and decode both ways.
func TestWorkloadsCross(t *testing.T) {
	ctx := context.Background()
	for _, p := range protocols {
		for _, wl := range workloads() {
			t.Run(p.String()+"/"+wl.name, func(t *testing.T) {
				ours, err := proto.Marshal(p, nil, wl.val)
				require.NoError(t, err)
				mb := thrift.NewTMemoryBuffer()
				ap := apacheProto(p, mb)
				require.NoError(t, wl.apW(ctx, ap))
				require.NoError(t, ap.Flush(ctx))
				require.Len(t, ours, mb.Len())
				if wl.name != "YCSBMap" {
					require.Equal(t, mb.Bytes(), ours)
				}
				got := wl.fresh()
				require.NoError(t, proto.Unmarshal(p, mb.Bytes(), nil, got))
				require.Equal(t, wl.val, got)

				mb.Reset()
				_, _ = mb.Write(ours)
				require.NoError(t, wl.apR(ctx, apacheProto(p, mb)))
				require.Zero(t, mb.Len(), "Apache consumed the whole encoding")
			})
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	ctx := context.Background()
	for _, wl := range workloads() {
		for _, p := range protocols {
			size := 0
			b.Run(wl.name+"/"+p.String()+"/hatrpc", func(b *testing.B) {
				buf := make([]byte, 0, 64<<10)
				bw := proto.NewBinaryWriter(buf)
				cw := proto.NewCompactWriter(buf)
				b.ReportAllocs()
				clk := startCPU()
				for b.Loop() {
					if p == proto.Binary {
						bw.Reset(buf)
						_ = wl.val.EncodeBinary(bw)
						size = bw.Len()
					} else {
						cw.Reset(buf)
						_ = wl.val.EncodeCompact(cw)
						size = cw.Len()
					}
				}
				clk.report(b)
				b.SetBytes(int64(size))
			})
			b.Run(wl.name+"/"+p.String()+"/apache", func(b *testing.B) {
				mb := thrift.NewTMemoryBufferLen(64 << 10)
				ap := apacheProto(p, mb)
				b.ReportAllocs()
				clk := startCPU()
				for b.Loop() {
					mb.Reset()
					_ = wl.apW(ctx, ap)
					_ = ap.Flush(ctx)
				}
				clk.report(b)
				b.SetBytes(int64(mb.Len()))
			})
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	ctx := context.Background()
	for _, wl := range workloads() {
		for _, p := range protocols {
			data, err := proto.Marshal(p, nil, wl.val)
			require.NoError(b, err)
			for _, mode := range []string{"hatrpc", "hatrpc-copy", "hatrpc-unsafe"} {
				if mode != "hatrpc" && wl.name != "YCSBMap" && wl.name != "YCSBList" {
					continue
				}
				b.Run(wl.name+"/"+p.String()+"/"+mode, func(b *testing.B) {
					br := proto.NewBinaryReader(nil, nil)
					cr := proto.NewCompactReader(nil, nil)
					// hatrpc: binary values alias the input, strings are
					// copied; copy: everything copied; unsafe: strings too
					// alias the input.
					br.Alias, cr.Alias = mode != "hatrpc-copy", mode != "hatrpc-copy"
					br.UnsafeStrings, cr.UnsafeStrings = mode == "hatrpc-unsafe", mode == "hatrpc-unsafe"
					b.SetBytes(int64(len(data)))
					b.ReportAllocs()
					s := wl.fresh()
					clk := startCPU()
					for b.Loop() {
						var err error
						if p == proto.Binary {
							br.Reset(data)
							err = s.DecodeBinary(br)
						} else {
							cr.Reset(data)
							err = s.DecodeCompact(cr)
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					clk.report(b)
				})
			}
			b.Run(wl.name+"/"+p.String()+"/apache", func(b *testing.B) {
				mb := thrift.NewTMemoryBufferLen(64 << 10)
				ap := apacheProto(p, mb)
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				clk := startCPU()
				for b.Loop() {
					mb.Reset()
					_, _ = mb.Write(data)
					if err := wl.apR(ctx, ap); err != nil {
						b.Fatal(err)
					}
				}
				clk.report(b)
			})
		}
	}
}

// cpuClock measures process CPU time: the machine is shared, so wall-clock
// ns/op swings with other load while CPU time per op stays comparable.
type cpuClock struct{ start int64 }

func cpuNow() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func startCPU() cpuClock { return cpuClock{cpuNow()} }

func (c cpuClock) report(b *testing.B) {
	if b.N > 0 {
		b.ReportMetric(float64(cpuNow()-c.start)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkMessage measures the whole-message helpers the runtime uses.
func BenchmarkMessage(b *testing.B) {
	for _, p := range protocols {
		mx := newMixed()
		b.Run("Encode/"+p.String(), func(b *testing.B) {
			var enc proto.Encoder
			buf := make([]byte, 0, 1024)
			b.ReportAllocs()
			clk := startCPU()
			for b.Loop() {
				out, _ := enc.Encode(p, buf, "mixed", proto.Call, 1, mx)
				b.SetBytes(int64(len(out)))
			}
			clk.report(b)
		})
		msg, _ := proto.EncodeMessage(p, nil, "mixed", proto.Call, 1, mx)
		b.Run("Decode/"+p.String(), func(b *testing.B) {
			d := proto.NewDecoder(nil)
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			var s Mixed
			clk := startCPU()
			for b.Loop() {
				if _, err := d.Begin(p, msg); err != nil {
					b.Fatal(err)
				}
				if err := d.ReadBody(&s); err != nil {
					b.Fatal(err)
				}
			}
			clk.report(b)
		})
	}
}

var sinkMap map[string][]byte

// BenchmarkBaseline measures the Go map work every YCSBMap encoder and
// decoder pays whatever the protocol (ranging over the 10 fields, building
// a 10-entry map), which bounds how far ahead of Apache those rows can get.
func BenchmarkBaseline(b *testing.B) {
	ym, _ := newYCSB()
	keys := make([]string, 0, len(ym.Fields))
	vals := make([][]byte, 0, len(ym.Fields))
	for k, v := range ym.Fields {
		keys, vals = append(keys, k), append(vals, v)
	}
	b.Run("YCSBMapIterate", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		clk := startCPU()
		for b.Loop() {
			for k, v := range ym.Fields {
				n += len(k) + len(v)
			}
		}
		clk.report(b)
		require.Equal(b, b.N*(6*10+1000), n)
	})
	// IterateCopy adds the bytes any encoding must copy (keys and values,
	// no framing): the floor for the YCSBMap encoders.
	b.Run("YCSBMapIterateCopy", func(b *testing.B) {
		buf := make([]byte, 0, 4096)
		b.ReportAllocs()
		clk := startCPU()
		for b.Loop() {
			buf = buf[:0]
			for k, v := range ym.Fields {
				buf = append(append(buf, k...), v...)
			}
		}
		clk.report(b)
		require.Len(b, buf, 6*10+1000)
	})
	b.Run("YCSBMapBuild", func(b *testing.B) {
		b.ReportAllocs()
		clk := startCPU()
		for b.Loop() {
			m := make(map[string][]byte, len(keys))
			for i, k := range keys {
				m[k] = vals[i]
			}
			sinkMap = m
		}
		clk.report(b)
	})
}
