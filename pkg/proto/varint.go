package proto

import (
	"encoding/binary"
	"math/bits"
)

// Varints are handled a machine word at a time: one 8-byte load or store
// plus shifts and masks replaces a loop whose data-dependent exit
// mispredicts on mixed-size values.

// writeVarint writes a varint with at most two stores.
func (w *CompactWriter) writeVarint(u uint64) {
	w.drop(&w.buf) // past the limit: counted, not kept (enclimit.go)
	b := w.buf
	n := len(b)
	if cap(b)-n < binary.MaxVarintLen64 {
		w.buf = appendVarint(b, u)
		return
	}
	if u < 1<<56 {
		k := (bits.Len64(u|1) + 6) / 7 // bytes used, 1..8
		binary.LittleEndian.PutUint64(b[n:n+8], spread(u)|contBits[k&7])
		w.buf = b[:n+k]
		return
	}
	// 9 or 10 bytes: eight full groups, then the top 8 bits.
	d := b[n : n+binary.MaxVarintLen64]
	binary.LittleEndian.PutUint64(d, spread(u)|0x8080808080808080)
	hi := u >> 56
	if hi < 0x80 {
		d[8] = byte(hi)
		w.buf = b[:n+9]
		return
	}
	d[8], d[9] = byte(hi)|0x80, byte(hi>>7)
	w.buf = b[:n+10]
}

// contBits[k%8] holds the continuation bits of a k-byte varint.
var contBits = [8]uint64{
	1: 0, 2: 0x80, 3: 0x8080, 4: 0x808080, 5: 0x80808080, 6: 0x8080808080,
	7: 0x808080808080, 0: 0x80808080808080,
}

// spread places the low 56 bits of v into 8 bytes of 7 bits each, halving
// the group width three times (56 -> 2x28 -> 4x14 -> 8x7).
func spread(v uint64) uint64 {
	v &= 1<<56 - 1
	v = v&0xfffffff | v&0xfffffff0000000<<4
	v = v&0x00003fff00003fff | v&0x0fffc0000fffc000<<2
	return v&0x007f007f007f007f | v&0x3f803f803f803f80<<1
}

// gather is the inverse of spread; continuation bits are dropped.
func gather(w uint64) uint64 {
	w &= 0x7f7f7f7f7f7f7f7f
	w = w&0x007f007f007f007f | w&0x7f007f007f007f00>>1
	w = w&0x00003fff00003fff | w&0x3fff00003fff0000>>2
	return w&0x000000000fffffff | w&0x0fffffff00000000>>4
}

func zigzag32(v int32) uint32 { return uint32(v<<1) ^ uint32(v>>31) }

// appendVarint is the general varint writer (long values, full buffers).
func appendVarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	n := len(b)
	if cap(b)-n < binary.MaxVarintLen64 {
		b = growCap(b, binary.MaxVarintLen64)
	}
	if v < 1<<56 {
		k := (bits.Len64(v) + 6) / 7
		binary.LittleEndian.PutUint64(b[n:n+8], spread(v)|contBits[k&7])
		return b[:n+k]
	}
	d := b[n : n+binary.MaxVarintLen64]
	i := 0
	for v >= 0x80 && i < binary.MaxVarintLen64-1 {
		d[i] = byte(v) | 0x80
		v >>= 7
		i++
	}
	d[i] = byte(v)
	return b[:n+i+1]
}

// growCap returns b with room for at least extra more bytes.
func growCap(b []byte, extra int) []byte {
	nb := make([]byte, len(b), 2*cap(b)+extra)
	copy(nb, b)
	return nb
}
