package emul

import (
	"encoding/binary"
	"math/bits"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// Pilaf's exported index: three registered regions the server writes and
// clients only READ (remote read, no remote write).
//
// buckets: nb × 64 B; bucket i holds the keys with hash % nb == i:
//
//	7 ways × (u32 tag, u32 entry+1; 0 = empty) | u64 sum(bytes 0..56)
//
// entries: ne × 128 B, one per indexed key:
//
//	u64 seq | u64 value offset | u32 value length | u16 key length | u16 0 |
//	u64 value sum | key (≤ 88 B) | u64 sum(bytes 0..120)
//
// values: the value area, records in kvstore's stored form, in
// power-of-two extents (64 B … 64 KiB) reused through free lists.
//
// A GET is bucket, entry, value: three READs. The server rewrites these
// bytes while clients READ them, so every READ is validated by its sum
// (the entry's sum covers the key, so a reused entry is noticed; the value
// is checked against the sum its entry names) and a mismatch retries the
// GET from the bucket. Updates are out of place: the new value goes to a
// fresh extent, the entry is rewritten, then the old extent is freed —
// a reader still holding the old entry sees a sum mismatch if the extent
// was reused, never a mix of two values.
const (
	bucketSize   = 64
	bucketWays   = 7
	entrySize    = 128
	entryKeyMax  = 88
	minExtent    = 64
	maxExtent    = 64 << 10
	numClasses   = 11 // 64 B << 0..10
	indexLayout  = 1
	indexMagic   = 0x504c_4146_0001 // "PLAF" v1, marks the parameters entry
	bucketSumOff = bucketWays * 8
	entrySumOff  = entrySize - 8
)

// keyHash places a key; tag is its bucket-independent half (never 0, so
// an empty way never matches).
func keyHash(key string) (h uint64, tag uint32) {
	h = xxhash.Sum64String(key)
	return h, uint32(h>>32) | 1
}

func bucketSum(b []byte) uint64 { return xxhash.Sum64(b[:bucketSumOff]) ^ 0xb0c4e7 }

func entrySum(b []byte) uint64 { return xxhash.Sum64(b[:entrySumOff]) ^ 0xe47a1 }

func extentClass(n int) int {
	if n <= minExtent {
		return 0
	}
	return bits.Len(uint(n-1)) - 6
}

// index is the server-side writer of the exported regions. Every method
// holds mu: one writer, any number of remote readers.
type index struct {
	mu                        sync.Mutex
	buckets, entries, values  *rdma.MR
	nb, ne                    int
	seq                       uint64
	byKey                     map[string]uint32
	freeEntries               []uint32
	free                      [numClasses][]uint64
	bump                      uint64
	published, unindexedPuts  uint64
	bucketFull, valueAreaFull uint64
}

type indexEntry struct {
	off uint64
	len uint32
}

func newIndex(pd *rdma.PD, capacity, valueBytes int) (*index, error) {
	nb := max(capacity/2, 1)
	x := &index{nb: nb, ne: capacity, byKey: make(map[string]uint32, capacity)}
	var err error
	if x.buckets, err = pd.AllocMR(nb*bucketSize, rdma.LocalWrite|rdma.RemoteRead); err != nil {
		return nil, err
	}
	if x.entries, err = pd.AllocMR(capacity*entrySize, rdma.LocalWrite|rdma.RemoteRead); err != nil {
		x.close()
		return nil, err
	}
	if x.values, err = pd.AllocMR(valueBytes, rdma.LocalWrite|rdma.RemoteRead); err != nil {
		x.close()
		return nil, err
	}
	b := x.buckets.Bytes()
	clear(b)
	for i := range nb {
		bk := b[i*bucketSize : (i+1)*bucketSize]
		binary.LittleEndian.PutUint64(bk[bucketSumOff:], bucketSum(bk))
	}
	clear(x.entries.Bytes())
	x.freeEntries = make([]uint32, 0, capacity)
	for e := capacity - 1; e >= 0; e-- {
		x.freeEntries = append(x.freeEntries, uint32(e))
	}
	return x, nil
}

func (x *index) close() {
	for _, mr := range []*rdma.MR{x.buckets, x.entries, x.values} {
		if mr != nil {
			_ = mr.Close()
		}
	}
}

// remote is what a Pilaf client needs, as bootstrap buffer entries.
func (x *index) remote() []rdma.RemoteBuffer {
	return []rdma.RemoteBuffer{
		x.buckets.Remote(), x.entries.Remote(), x.values.Remote(),
		{Addr: uint64(x.nb)<<32 | uint64(x.ne), RKey: indexLayout, Len: indexMagic},
	}
}

func (x *index) bucket(h uint64) []byte {
	i := int(h % uint64(x.nb))
	return x.buckets.Bytes()[i*bucketSize : (i+1)*bucketSize]
}

func (x *index) entry(e uint32) []byte {
	return x.entries.Bytes()[int(e)*entrySize : (int(e)+1)*entrySize]
}

func (x *index) allocExtent(n int) (uint64, bool) {
	c := extentClass(n)
	if fl := x.free[c]; len(fl) > 0 {
		off := fl[len(fl)-1]
		x.free[c] = fl[:len(fl)-1]
		return off, true
	}
	size := uint64(minExtent << c)
	if x.bump+size > uint64(x.values.Len()) {
		return 0, false
	}
	off := x.bump
	x.bump += size
	return off, true
}

func (x *index) freeExtent(off uint64, n uint32) {
	c := extentClass(int(n))
	x.free[c] = append(x.free[c], off)
}

// publish makes val (a stored record) the indexed value of key. A key the
// index cannot hold (too long, value too large, bucket or area full) is
// dropped from the index: clients then miss and ask the server by RPC.
func (x *index) publish(key string, val []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.publishLocked(key, val)
}

func (x *index) publishLocked(key string, val []byte) {
	if len(key) > entryKeyMax || len(val) > maxExtent || len(val) == 0 {
		x.unindexedPuts++
		x.removeLocked(key)
		return
	}
	h, tag := keyHash(key)
	e, known := x.byKey[key]
	var old indexEntry
	if known {
		eb := x.entry(e)
		old = indexEntry{off: binary.LittleEndian.Uint64(eb[8:]), len: binary.LittleEndian.Uint32(eb[16:])}
	} else {
		if len(x.freeEntries) == 0 {
			x.unindexedPuts++
			return
		}
		e = x.freeEntries[len(x.freeEntries)-1]
	}
	off, ok := x.allocExtent(len(val))
	if !ok {
		x.valueAreaFull++
		x.removeLocked(key)
		return
	}
	copy(x.values.Bytes()[off:], val)
	x.seq++
	eb := x.entry(e)
	binary.LittleEndian.PutUint64(eb[0:], x.seq)
	binary.LittleEndian.PutUint64(eb[8:], off)
	binary.LittleEndian.PutUint32(eb[16:], uint32(len(val)))
	binary.LittleEndian.PutUint16(eb[20:], uint16(len(key)))
	binary.LittleEndian.PutUint16(eb[22:], 0)
	binary.LittleEndian.PutUint64(eb[24:], xxhash.Sum64(val))
	clear(eb[32 : 32+entryKeyMax])
	copy(eb[32:], key)
	binary.LittleEndian.PutUint64(eb[entrySumOff:], entrySum(eb))
	if known {
		x.freeExtent(old.off, old.len)
		x.published++
		return
	}
	// A new key: the entry is complete before a bucket way points at it.
	bk := x.bucket(h)
	for w := range bucketWays {
		if binary.LittleEndian.Uint32(bk[w*8+4:]) == 0 {
			binary.LittleEndian.PutUint32(bk[w*8:], tag)
			binary.LittleEndian.PutUint32(bk[w*8+4:], e+1)
			binary.LittleEndian.PutUint64(bk[bucketSumOff:], bucketSum(bk))
			x.freeEntries = x.freeEntries[:len(x.freeEntries)-1]
			x.byKey[key] = e
			x.published++
			return
		}
	}
	x.bucketFull++
	x.freeExtent(off, uint32(len(val)))
	clear(eb)
}

// remove drops key from the index (a delete, or a key it cannot hold).
func (x *index) remove(key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(key)
}

func (x *index) removeLocked(key string) {
	e, ok := x.byKey[key]
	if !ok {
		return
	}
	h, _ := keyHash(key)
	bk := x.bucket(h)
	for w := range bucketWays {
		if binary.LittleEndian.Uint32(bk[w*8+4:]) == e+1 {
			clear(bk[w*8 : w*8+8])
			binary.LittleEndian.PutUint64(bk[bucketSumOff:], bucketSum(bk))
			break
		}
	}
	eb := x.entry(e)
	x.freeExtent(binary.LittleEndian.Uint64(eb[8:]), binary.LittleEndian.Uint32(eb[16:]))
	clear(eb) // its sum no longer matches: a reader holding the way retries
	delete(x.byKey, key)
	x.freeEntries = append(x.freeEntries, e)
}

// IndexStats describes Pilaf's exported index.
type IndexStats struct {
	Keys, Capacity  int
	Published       uint64 // index updates
	Unindexed       uint64 // writes of keys the index cannot hold (served by RPC)
	BucketFull      uint64
	ValueAreaFull   uint64
	ValueAreaUsed   uint64 // bytes ever carved from the area (extents are reused)
	ValueAreaLength int
}

func (x *index) stats() IndexStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	return IndexStats{
		Keys: len(x.byKey), Capacity: x.ne, Published: x.published, Unindexed: x.unindexedPuts,
		BucketFull: x.bucketFull, ValueAreaFull: x.valueAreaFull, ValueAreaUsed: x.bump,
		ValueAreaLength: x.values.Len(),
	}
}
