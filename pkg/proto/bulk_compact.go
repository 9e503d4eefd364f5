package proto

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unsafe"
)

// varintLen[bits.Len64(u)] is the encoded length of the varint u.
var varintLen = func() (t [65]uint8) {
	for l := range t {
		t[l] = uint8(max(1, (l+6)/7))
	}
	return t
}()

// contMask[k] holds the continuation bits of the first 8 bytes of a k-byte
// varint (k = 1..10).
var contMask = [11]uint64{
	2: 0x80, 3: 0x8080, 4: 0x808080, 5: 0x80808080, 6: 0x8080808080,
	7: 0x808080808080, 8: 0x80808080808080,
	9: 0x8080808080808080, 10: 0x8080808080808080,
}

// putVarint stores the varint u at d[0:] and returns its length. It has no
// data-dependent branch (list values of mixed sizes would mispredict one),
// so it always stores 10 bytes: d must have room for them.
func putVarint(d []byte, u uint64) int {
	k := varintLen[bits.Len64(u)]
	binary.LittleEndian.PutUint64(d[:8], spread(u)|contMask[k])
	// Bytes 8 and 9 of a 9- or 10-byte varint: bit 63 of u is both byte
	// 8's continuation bit and byte 9's only bit. Shorter varints store
	// zeros past their end, which later writes overwrite.
	hi := u >> 56
	binary.LittleEndian.PutUint16(d[8:10], uint16(hi|hi>>7<<8))
	return int(k)
}

// putVarint32 is putVarint for values below 2^32 (at most 5 bytes); d must
// have room for 8.
func putVarint32(d []byte, u uint32) int {
	k := varintLen[bits.Len32(u)]
	binary.LittleEndian.PutUint64(d[:8], spread(uint64(u))|contMask[k])
	return int(k)
}

// varintsLen is the encoded size of v's elements as the varints of zz
// (only where the limit is near: enclimit.go).
func varintsLen[T any](v []T, zz func(T) uint64) int {
	n := 0
	for _, x := range v {
		n += int(varintLen[bits.Len64(zz(x))])
	}
	return n
}

// WriteI64s writes the elements of an i64 list.
func (w *CompactWriter) WriteI64s(v []int64) {
	if len(w.buf)+10*len(v) > w.lim && w.past(&w.buf, varintsLen(v, func(x int64) uint64 { return uint64(x<<1) ^ uint64(x>>63) })) {
		return
	}
	b := w.buf
	if cap(b)-len(b) < 10*len(v) {
		b = growCap(b, 10*len(v))
	}
	n := len(b)
	d := b[n:cap(b)]
	o := 0
	for _, x := range v {
		o += putVarint(d[o:], uint64(x<<1)^uint64(x>>63))
	}
	w.buf = b[:n+o]
}

// WriteI32s writes the elements of an i32 list.
func (w *CompactWriter) WriteI32s(v []int32) {
	if len(v) == 0 {
		return // the slack below would grow an empty buffer
	}
	if len(w.buf)+5*len(v)+3 > w.lim && w.past(&w.buf, varintsLen(v, func(x int32) uint64 { return uint64(zigzag32(x)) })) {
		return
	}
	b := w.buf
	if room := 5*len(v) + 3; cap(b)-len(b) < room {
		b = growCap(b, room)
	}
	n := len(b)
	d := b[n:cap(b)]
	o := 0
	for _, x := range v {
		o += putVarint32(d[o:], zigzag32(x))
	}
	w.buf = b[:n+o]
}

// WriteI16s writes the elements of an i16 list.
func (w *CompactWriter) WriteI16s(v []int16) {
	if len(v) == 0 {
		return // the slack below would grow an empty buffer
	}
	if len(w.buf)+3*len(v)+5 > w.lim && w.past(&w.buf, varintsLen(v, func(x int16) uint64 { return uint64(zigzag32(int32(x))) })) {
		return
	}
	b := w.buf
	if room := 3*len(v) + 5; cap(b)-len(b) < room {
		b = growCap(b, room)
	}
	n := len(b)
	d := b[n:cap(b)]
	o := 0
	for _, x := range v {
		o += putVarint32(d[o:], zigzag32(int32(x)))
	}
	w.buf = b[:n+o]
}

// WriteDoubles writes the elements of a double list.
func (w *CompactWriter) WriteDoubles(v []float64) {
	if len(w.buf)+8*len(v) > w.lim && w.past(&w.buf, 8*len(v)) {
		return
	}
	n := len(w.buf)
	b := extend(w.buf, 8*len(v))
	d := b[n:]
	for i, x := range v {
		binary.LittleEndian.PutUint64(d[8*i:], math.Float64bits(x))
	}
	w.buf = b
}

// WriteI8s writes the elements of a byte list.
func (w *CompactWriter) WriteI8s(v []int8) {
	if len(w.buf)+len(v) > w.lim && w.past(&w.buf, len(v)) {
		return
	}
	w.buf = append(w.buf, int8Bytes(v)...)
}

// WriteBools writes the elements of a bool list (one byte each inside
// containers).
func (w *CompactWriter) WriteBools(v []bool) {
	if len(w.buf)+len(v) > w.lim && w.past(&w.buf, len(v)) {
		return
	}
	n := len(w.buf)
	b := extend(w.buf, len(v))
	d := b[n:]
	for i, x := range v {
		var c byte = cFalse
		if x {
			c = cTrue
		}
		d[i] = c
	}
	w.buf = b
}

// WriteBinaries writes the elements of a binary list.
func (w *CompactWriter) WriteBinaries(v [][]byte) {
	// Appending with the buffer in a local measured faster than sizing
	// the list first: varint prefixes make the exact size a second pass.
	b, lim := w.buf, w.lim
	for i, x := range v {
		if len(b)+5+len(x) > lim { // the limit (enclimit.go): value by value from here
			w.buf = b
			for _, x := range v[i:] {
				w.WriteBinary(x)
			}
			return
		}
		b = append(appendLen(b, len(x)), x...)
	}
	w.buf = b
}

// WriteStrings writes the elements of a string list.
func (w *CompactWriter) WriteStrings(v []string) {
	// Appending with the buffer in a local measured faster than sizing
	// the list first: varint prefixes make the exact size a second pass.
	b, lim := w.buf, w.lim
	for i, x := range v {
		if len(b)+5+len(x) > lim { // the limit (enclimit.go): value by value from here
			w.buf = b
			for _, x := range v[i:] {
				w.WriteString(x)
			}
			return
		}
		b = append(appendLen(b, len(x)), x...)
	}
	w.buf = b
}

// fixed consumes n bytes holding a run of fixed-size values.
func (r *CompactReader) fixed(n int) ([]byte, error) {
	p := r.pos
	if p < 0 || n > len(r.buf)-p {
		return nil, r.truncated()
	}
	r.pos = p + n
	return r.buf[p : p+n], nil
}

// ReadI64s fills dst with the elements of an i64 list.
func (r *CompactReader) ReadI64s(dst []int64) error {
	i, p, buf := 0, r.pos, r.buf
	// Decoding one varint at a time chains each load on the previous
	// varint's length (load, find stop byte, add: ~12 cycles an element).
	// Blocks instead find every stop byte of 64 input bytes from loads at
	// fixed offsets, then walk the stop-byte bitmap: an element's position
	// depends only on the bitmap, so elements decode in parallel.
	for i < len(dst) && p >= 0 && p <= len(buf)-i64Block-10 {
		b := buf[p : p+i64Block+10]
		var stops uint64 // bit j: byte p+j ends a varint
		for j := 0; j < i64Block; j += 8 {
			m := ^binary.LittleEndian.Uint64(b[j:j+8]) & 0x8080808080808080
			stops |= (m >> 7 * 0x0102040810204080) >> 56 << j
		}
		s := 0 // start of the next varint within b
		for ; stops != 0 && i < len(dst); i++ {
			e := bits.TrailingZeros64(stops) + 1
			stops &= stops - 1
			k := e - s // its length
			if k > 9 && (k > 10 || b[s+9] > 1) {
				break // too long or overflowing: the careful decoder says which
			}
			w := binary.LittleEndian.Uint64(b[s : s+8])
			hi := uint64(binary.LittleEndian.Uint16(b[s+8 : s+10]))
			u := gather(w&lowBytes[k&15]) | (hi&0x7f<<56|hi>>8<<63)&highBits[k&15]
			dst[i] = int64(u>>1) ^ -int64(u&1)
			s = e
		}
		if s == 0 {
			// No varint ends in the block, or the first is malformed:
			// the loop below reports it. (A malformed one later in the
			// block starts the next block.)
			break
		}
		p += s
	}
	for ; i < len(dst); i++ {
		// Near the end of the input: word-at-a-time while 10 bytes are
		// left, with the position kept in a register.
		var u uint64
		if p >= 0 && p+10 <= len(buf) {
			w := binary.LittleEndian.Uint64(buf[p : p+8])
			if m := ^w & 0x8080808080808080; m != 0 {
				p += bits.TrailingZeros64(m)>>3 + 1
				u = gather(w & (m ^ (m - 1)))
				dst[i] = int64(u>>1) ^ -int64(u&1)
				continue
			}
			if b8 := buf[p+8]; b8 < 0x80 {
				u, p = gather(w)|uint64(b8)<<56, p+9
				dst[i] = int64(u>>1) ^ -int64(u&1)
				continue
			} else if b9 := buf[p+9]; b9 <= 1 {
				u, p = gather(w)|uint64(b8&0x7f)<<56|uint64(b9)<<63, p+10
				dst[i] = int64(u>>1) ^ -int64(u&1)
				continue
			}
		}
		// Near the end of the input, or malformed: the careful decoder.
		r.pos = p
		u, err := r.uvarint()
		if err != nil {
			return err
		}
		p = r.pos
		dst[i] = int64(u>>1) ^ -int64(u&1)
	}
	r.pos = p
	return nil
}

// i64Block is how many input bytes ReadI64s scans for stop bytes at once.
const i64Block = 64

// lowBytes[k] keeps the first min(k, 8) bytes of a k-byte varint's first
// word; highBits[k] keeps the bits bytes 8 and 9 contribute (k = 9, 10).
var (
	lowBytes = [16]uint64{
		1: 1<<8 - 1, 2: 1<<16 - 1, 3: 1<<24 - 1, 4: 1<<32 - 1, 5: 1<<40 - 1,
		6: 1<<48 - 1, 7: 1<<56 - 1, 8: 1<<64 - 1, 9: 1<<64 - 1, 10: 1<<64 - 1,
	}
	highBits = [16]uint64{9: 0x7f << 56, 10: 1<<64 - 1}
)

// ReadI32s fills dst with the elements of an i32 list (each truncated to 32
// bits, as ReadI32 does).
func (r *CompactReader) ReadI32s(dst []int32) error {
	p, buf := r.pos, r.buf
	for i := range dst {
		if p >= 0 && p+8 <= len(buf) {
			w := binary.LittleEndian.Uint64(buf[p : p+8])
			if m := ^w & 0x8080808080808080; m != 0 {
				p += bits.TrailingZeros64(m)>>3 + 1
				u := uint32(gather(w & (m ^ (m - 1))))
				dst[i] = int32(u>>1) ^ -int32(u&1)
				continue
			}
		}
		r.pos = p
		u64, err := r.uvarint()
		if err != nil {
			return err
		}
		p = r.pos
		u := uint32(u64)
		dst[i] = int32(u>>1) ^ -int32(u&1)
	}
	r.pos = p
	return nil
}

// ReadI16s fills dst with the elements of an i16 list (each truncated as
// ReadI16 does).
func (r *CompactReader) ReadI16s(dst []int16) error {
	p, buf := r.pos, r.buf
	for i := range dst {
		if p >= 0 && p+8 <= len(buf) {
			w := binary.LittleEndian.Uint64(buf[p : p+8])
			if m := ^w & 0x8080808080808080; m != 0 {
				p += bits.TrailingZeros64(m)>>3 + 1
				u := uint32(gather(w & (m ^ (m - 1))))
				dst[i] = int16(int32(u>>1) ^ -int32(u&1))
				continue
			}
		}
		r.pos = p
		u64, err := r.uvarint()
		if err != nil {
			return err
		}
		p = r.pos
		u := uint32(u64)
		dst[i] = int16(int32(u>>1) ^ -int32(u&1))
	}
	r.pos = p
	return nil
}

// ReadDoubles fills dst with the elements of a double list.
func (r *CompactReader) ReadDoubles(dst []float64) error {
	src, err := r.fixed(8 * len(dst))
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:]))
	}
	return nil
}

// ReadI8s fills dst with the elements of a byte list.
func (r *CompactReader) ReadI8s(dst []int8) error {
	src, err := r.fixed(len(dst))
	if err != nil {
		return err
	}
	copy(int8Bytes(dst), src)
	return nil
}

// ReadBools fills dst with the elements of a bool list (one byte each
// inside containers, true only for cTrue as in ReadBool).
func (r *CompactReader) ReadBools(dst []bool) error {
	src, err := r.fixed(len(dst))
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = src[i] == cTrue
	}
	return nil
}

// rawList fills dst with the elements of a string or binary list as
// sub-slices of the input, validated exactly as value does.
func (r *CompactReader) rawList(dst [][]byte) error {
	p, buf, maxLen := r.pos, r.buf, r.lim.MaxStringLength
	for i := range dst {
		// value's fast path: a one-byte length.
		if p >= 0 && p < len(buf) {
			n := int(buf[p])
			if e := p + 1 + n; n < 0x80 && n <= maxLen && e <= len(buf) {
				dst[i] = buf[p+1 : e : e]
				p = e
				continue
			}
		}
		r.pos = p
		b, err := r.value()
		if err != nil {
			return err
		}
		dst[i], p = b, r.pos
	}
	r.pos = p
	return nil
}

// ReadBinaries fills dst with the elements of a binary list, aliasing the
// input when Alias is set. Copies share one allocation, each capped at its
// own length so appending to one cannot overwrite the next.
func (r *CompactReader) ReadBinaries(dst [][]byte) error {
	if err := r.rawList(dst); err != nil {
		return err
	}
	if !r.Alias {
		copyOut(dst)
	}
	return nil
}

// ReadStrings fills dst with the elements of a string list, copied unless
// UnsafeStrings.
func (r *CompactReader) ReadStrings(dst []string) error {
	p, buf, maxLen := r.pos, r.buf, r.lim.MaxStringLength
	for i := range dst {
		var b []byte
		if p >= 0 && p < len(buf) {
			n := int(buf[p])
			if e := p + 1 + n; n < 0x80 && n <= maxLen && e <= len(buf) {
				b = buf[p+1 : e]
				p = e
			}
		}
		if b == nil {
			r.pos = p
			var err error
			if b, err = r.value(); err != nil {
				return err
			}
			p = r.pos
		}
		if r.UnsafeStrings && len(b) > 0 {
			dst[i] = unsafe.String(&b[0], len(b))
		} else {
			dst[i] = r.strs.str(b)
		}
	}
	r.pos = p
	return nil
}
