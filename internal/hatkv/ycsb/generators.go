package ycsb

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Generator produces integers from a distribution. Generators are shared
// by client threads; each thread passes its own random source, so runs
// are reproducible per thread seed.
type Generator interface {
	Next(r *rand.Rand) int64
	// Last returns the most recently generated value.
	Last() int64
}

type last struct{ v atomic.Int64 }

func (l *last) Last() int64 { return l.v.Load() }

// FNVHash64 is YCSB's Utils.fnvhash64: FNV-1a over the 8 little-endian
// bytes of val, with Java's Math.abs (which leaves MinInt64 negative).
func FNVHash64(val int64) int64 {
	const (
		offset = 0xCBF29CE484222325
		prime  = 1099511628211
	)
	h := uint64(offset)
	v := uint64(val)
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= prime
		v >>= 8
	}
	s := int64(h)
	if s < 0 {
		s = -s
	}
	return s
}

// Constant always yields the same value.
type Constant struct{ V int64 }

func (c Constant) Next(*rand.Rand) int64 { return c.V }
func (c Constant) Last() int64           { return c.V }

// Counter yields start, start+1, ... (YCSB CounterGenerator).
type Counter struct{ n atomic.Int64 }

// NewCounter returns a counter whose first value is start.
func NewCounter(start int64) *Counter {
	c := &Counter{}
	c.n.Store(start)
	return c
}

func (c *Counter) Next(*rand.Rand) int64 { return c.n.Add(1) - 1 }
func (c *Counter) Last() int64           { return c.n.Load() - 1 }

// AcknowledgedCounter hands out insert key numbers but reports as Last
// only the highest value below which every value has been acknowledged,
// so readers never pick a key whose insert has not completed (YCSB
// AcknowledgedCounterGenerator).
type AcknowledgedCounter struct {
	Counter
	mu      sync.Mutex
	limit   int64
	pending map[int64]bool
}

// NewAcknowledgedCounter returns a counter starting at start.
func NewAcknowledgedCounter(start int64) *AcknowledgedCounter {
	a := &AcknowledgedCounter{limit: start - 1, pending: map[int64]bool{}}
	a.n.Store(start)
	return a
}

// Acknowledge marks v as completed.
func (a *AcknowledgedCounter) Acknowledge(v int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pending[v] = true
	for a.pending[a.limit+1] {
		delete(a.pending, a.limit+1)
		a.limit++
	}
}

// Last returns the highest contiguously acknowledged value.
func (a *AcknowledgedCounter) Last() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limit
}

// Uniform yields integers uniformly in [lb, ub].
type Uniform struct {
	last
	lb, ub int64
}

// NewUniform returns a uniform generator over [lb, ub].
func NewUniform(lb, ub int64) *Uniform { return &Uniform{lb: lb, ub: ub} }

func (u *Uniform) Next(r *rand.Rand) int64 {
	v := u.lb + r.Int64N(u.ub-u.lb+1)
	u.v.Store(v)
	return v
}

// ZipfianConstant is YCSB's default skew.
const ZipfianConstant = 0.99

// Zipfian is a port of YCSB's ZipfianGenerator (Gray et al., "Quickly
// Generating Billion-Record Synthetic Databases", SIGMOD 1994). Item base
// is the most popular, base+1 the next, and so on.
type Zipfian struct {
	last
	items, base              int64
	theta, zeta2theta, alpha float64
	// params is replaced as a whole when the item count grows, so the
	// common path reads it without taking mu.
	params atomic.Pointer[zipfParams]
	mu     sync.Mutex
}

type zipfParams struct {
	zetan, eta   float64
	countForZeta int64
}

// NewZipfian returns a generator over [min, max] with the given constant.
func NewZipfian(min, max int64, theta float64) *Zipfian {
	return NewZipfianWithZeta(min, max, theta, Zeta(0, max-min+1, theta, 0))
}

// NewZipfianWithZeta is NewZipfian with a precomputed zeta(n, theta),
// which avoids the O(n) sum for huge item counts.
func NewZipfianWithZeta(min, max int64, theta, zetan float64) *Zipfian {
	z := &Zipfian{items: max - min + 1, base: min, theta: theta}
	z.zeta2theta = Zeta(0, 2, theta, 0)
	z.alpha = 1.0 / (1.0 - theta)
	z.params.Store(&zipfParams{zetan: zetan, eta: z.eta(zetan), countForZeta: z.items})
	return z
}

// eta keeps the construction-time item count even after the count grows,
// as YCSB does, for fidelity with its distributions.
func (z *Zipfian) eta(zetan float64) float64 {
	return (1 - math.Pow(2.0/float64(z.items), 1-z.theta)) / (1 - z.zeta2theta/zetan)
}

// Zeta computes sum_{i=st}^{n-1} 1/(i+1)^theta on top of initial, which
// lets the zipfian constant grow incrementally with the item count.
func Zeta(st, n int64, theta, initial float64) float64 {
	sum := initial
	for i := st; i < n; i++ {
		sum += 1 / math.Pow(float64(i+1), theta)
	}
	return sum
}

// Next draws from the full item range.
func (z *Zipfian) Next(r *rand.Rand) int64 { return z.NextN(r, z.items) }

// NextN draws with the item count changed to itemCount. As in YCSB, zeta
// is extended incrementally when the count grows and never recomputed
// when it shrinks.
func (z *Zipfian) NextN(r *rand.Rand, itemCount int64) int64 {
	p := z.params.Load()
	if itemCount > p.countForZeta {
		z.mu.Lock()
		if p = z.params.Load(); itemCount > p.countForZeta {
			zetan := Zeta(p.countForZeta, itemCount, z.theta, p.zetan)
			p = &zipfParams{zetan: zetan, eta: z.eta(zetan), countForZeta: itemCount}
			z.params.Store(p)
		}
		z.mu.Unlock()
	}
	zetan, eta := p.zetan, p.eta

	u := r.Float64()
	uz := u * zetan
	var v int64
	switch {
	case uz < 1.0:
		v = z.base
	case uz < 1.0+math.Pow(0.5, z.theta):
		v = z.base + 1
	default:
		v = z.base + int64(float64(itemCount)*math.Pow(eta*u-eta+1, z.alpha))
	}
	z.v.Store(v)
	return v
}

// ScrambledZipfian constants from YCSB: a zipfian over 10^10 items whose
// zeta is precomputed, hashed down onto the real key range.
const (
	scrambledItemCount = 10000000000
	scrambledZetan     = 26.46902820178302
)

// ScrambledZipfian spreads the popular items of a zipfian distribution
// over the key space with FNV-1a, as YCSB's ScrambledZipfianGenerator.
type ScrambledZipfian struct {
	last
	min, itemCount int64
	gen            *Zipfian
}

// NewScrambledZipfian returns a scrambled zipfian over [min, max].
func NewScrambledZipfian(min, max int64) *ScrambledZipfian {
	return &ScrambledZipfian{
		min:       min,
		itemCount: max - min + 1,
		gen:       NewZipfianWithZeta(0, scrambledItemCount, ZipfianConstant, scrambledZetan),
	}
}

func (s *ScrambledZipfian) Next(r *rand.Rand) int64 {
	v := s.min + FNVHash64(s.gen.Next(r))%s.itemCount
	s.v.Store(v)
	return v
}

// SkewedLatest favours the most recently inserted items (YCSB
// SkewedLatestGenerator): it returns basis.Last() minus a zipfian offset.
type SkewedLatest struct {
	last
	basis   Generator
	zipfian *Zipfian
}

// NewSkewedLatest follows basis, typically the insert key counter.
func NewSkewedLatest(basis Generator) *SkewedLatest {
	n := basis.Last()
	if n < 1 {
		n = 1
	}
	return &SkewedLatest{basis: basis, zipfian: NewZipfian(0, n-1, ZipfianConstant)}
}

func (s *SkewedLatest) Next(r *rand.Rand) int64 {
	max := s.basis.Last()
	v := max - s.zipfian.NextN(r, max)
	s.v.Store(v)
	return v
}

// Hotspot picks from a hot fraction of [lb, ub] with probability
// hotOpnFraction and from the rest otherwise (YCSB HotspotIntegerGenerator).
type Hotspot struct {
	last
	lb, hotInterval, coldInterval int64
	hotOpn                        float64
}

// NewHotspot returns a hotspot generator.
func NewHotspot(lb, ub int64, hotSetFraction, hotOpnFraction float64) (*Hotspot, error) {
	if hotSetFraction < 0 || hotSetFraction > 1 || hotOpnFraction < 0 || hotOpnFraction > 1 {
		return nil, fmt.Errorf("ycsb: hotspot fractions must be in [0,1], got %v/%v", hotSetFraction, hotOpnFraction)
	}
	if lb > ub {
		lb, ub = ub, lb
	}
	interval := ub - lb + 1
	hot := int64(float64(interval) * hotSetFraction)
	return &Hotspot{lb: lb, hotInterval: hot, coldInterval: interval - hot, hotOpn: hotOpnFraction}, nil
}

func (h *Hotspot) Next(r *rand.Rand) int64 {
	var v int64
	if h.hotInterval > 0 && (r.Float64() < h.hotOpn || h.coldInterval == 0) {
		v = h.lb + r.Int64N(h.hotInterval)
	} else {
		v = h.lb + h.hotInterval + r.Int64N(h.coldInterval)
	}
	h.v.Store(v)
	return v
}

// Discrete picks one of several values with fixed weights (YCSB
// DiscreteGenerator).
type Discrete[T any] struct {
	values  []T
	weights []float64
	sum     float64
}

// Add adds a value with the given weight; zero weights are ignored.
func (d *Discrete[T]) Add(v T, weight float64) {
	if weight <= 0 {
		return
	}
	d.values = append(d.values, v)
	d.weights = append(d.weights, weight)
	d.sum += weight
}

// Len returns the number of values with non-zero weight.
func (d *Discrete[T]) Len() int { return len(d.values) }

// Next draws a value; it panics if no value was added, a programming
// error that NewWorkload rules out.
func (d *Discrete[T]) Next(r *rand.Rand) T {
	u := r.Float64()
	for i, w := range d.weights {
		pw := w / d.sum
		if u < pw {
			return d.values[i]
		}
		u -= pw
	}
	return d.values[len(d.values)-1]
}
