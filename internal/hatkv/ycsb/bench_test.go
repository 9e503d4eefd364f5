package ycsb

import (
	"sync/atomic"
	"testing"
	"time"
)

func BenchmarkGenerators(b *testing.B) {
	ack := NewAcknowledgedCounter(1000000)
	gens := []struct {
		name string
		g    Generator
	}{
		{"uniform", NewUniform(0, 999999)},
		{"zipfian", NewZipfian(0, 999999, ZipfianConstant)},
		{"scrambled-zipfian", NewScrambledZipfian(0, 999999)},
		{"latest", NewSkewedLatest(ack)},
	}
	for _, tc := range gens {
		b.Run(tc.name, func(b *testing.B) {
			var seed atomic.Uint64
			b.RunParallel(func(pb *testing.PB) {
				r := rng(seed.Add(1))
				for pb.Next() {
					tc.g.Next(r)
				}
			})
		})
	}
}

func BenchmarkNextOperation(b *testing.B) {
	p := NewProperties()
	if err := p.LoadWorkload("workloada_hatkv"); err != nil {
		b.Fatal(err)
	}
	p.Set("recordcount", "1000000")
	cfg, err := ParseConfig(p)
	if err != nil {
		b.Fatal(err)
	}
	w, err := NewWorkload(cfg)
	if err != nil {
		b.Fatal(err)
	}
	r := rng(1)
	b.ReportAllocs()
	for b.Loop() {
		w.Done(w.Next(r))
	}
}

func BenchmarkRecord(b *testing.B) {
	m := NewMeasurements()
	b.RunParallel(func(pb *testing.PB) {
		d := time.Duration(1)
		for pb.Next() {
			d = d*7%1000000 + 1
			m.Record("READ", d, nil)
		}
	})
}
