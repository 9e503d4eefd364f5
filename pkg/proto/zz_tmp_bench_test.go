package proto

import (
	"syscall"
	"testing"
)

func cpuNowT() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}


var small = false

func tmpVals() []int64 {
	v := make([]int64, 1000)
	for i := range v {
		v[i] = int64(i) * 7919 * int64(1-2*(i%2)) << (i % 40)
	}
	return v
}

func BenchmarkTmpCompactI64(b *testing.B) {
	v := tmpVals()
	if small {
		for i := range v {
			v[i] >>= 10
		}
	}
	w := NewCompactWriter(make([]byte, 0, 1<<16))
	for _, x := range v {
		w.WriteI64(x)
	}
	data := append([]byte(nil), w.Bytes()...)
	dst := make([]int64, len(v))
	b.Run("enc-loop", func(b *testing.B) {
		c0 := cpuNowT()
		for b.Loop() {
			w.Reset(w.buf[:0])
			for _, x := range v {
				w.WriteI64(x)
			}
		}
		b.ReportMetric(float64(cpuNowT()-c0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("enc-bulk", func(b *testing.B) {
		c0 := cpuNowT()
		for b.Loop() {
			w.Reset(w.buf[:0])
			w.WriteI64s(v)
		}
		b.ReportMetric(float64(cpuNowT()-c0)/float64(b.N), "cpu-ns/op")
	})
	r := NewCompactReader(data, nil)
	b.Run("dec-loop", func(b *testing.B) {
		c0 := cpuNowT()
		for b.Loop() {
			r.Reset(data)
			for i := range dst {
				dst[i], _ = r.ReadI64()
			}
		}
		b.ReportMetric(float64(cpuNowT()-c0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("dec-bulk", func(b *testing.B) {
		c0 := cpuNowT()
		for b.Loop() {
			r.Reset(data)
			_ = r.ReadI64s(dst)
		}
		b.ReportMetric(float64(cpuNowT()-c0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("dec-bulk-alloc", func(b *testing.B) {
		c0 := cpuNowT()
		for b.Loop() {
			r.Reset(data)
			d := make([]int64, 1000)
			_ = r.ReadI64s(d)
		}
		b.ReportMetric(float64(cpuNowT()-c0)/float64(b.N), "cpu-ns/op")
	})
	br := NewBinaryReader(nil, nil)
	bw := NewBinaryWriter(nil)
	bw.WriteI64s(v)
	bdata := bw.Bytes()
	b.Run("bin-dec-bulk", func(b *testing.B) {
		c0 := cpuNowT()
		for b.Loop() {
			br.Reset(bdata)
			_ = br.ReadI64s(dst)
		}
		b.ReportMetric(float64(cpuNowT()-c0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("bin-dec-bulk-alloc", func(b *testing.B) {
		c0 := cpuNowT()
		for b.Loop() {
			br.Reset(bdata)
			d := make([]int64, 1000)
			_ = br.ReadI64s(d)
		}
		b.ReportMetric(float64(cpuNowT()-c0)/float64(b.N), "cpu-ns/op")
	})
}
