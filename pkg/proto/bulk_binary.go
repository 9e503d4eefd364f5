package proto

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// Whole-list writers and readers. Generated code calls them for lists and
// sets of unnamed scalar, string and binary elements (after the list
// header): one call per list instead of one per element lets the position
// live in a register and the capacity or length be checked once.

// extend returns b lengthened by n bytes, reallocating at most once.
func extend(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		b = growCap(b, n)
	}
	return b[:len(b)+n]
}

// int8Bytes views v as bytes: i8 elements travel as raw bytes in both
// protocols, so a list of them is one copy.
func int8Bytes(v []int8) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v))
}

// WriteI64s writes the elements of an i64 list.
func (w *BinaryWriter) WriteI64s(v []int64) {
	if len(w.buf)+8*len(v) > w.lim && w.past(&w.buf, 8*len(v)) {
		return
	}
	n := len(w.buf)
	b := extend(w.buf, 8*len(v))
	d := b[n:]
	for i, x := range v {
		binary.BigEndian.PutUint64(d[8*i:], uint64(x))
	}
	w.buf = b
}

// WriteI32s writes the elements of an i32 list.
func (w *BinaryWriter) WriteI32s(v []int32) {
	if len(w.buf)+4*len(v) > w.lim && w.past(&w.buf, 4*len(v)) {
		return
	}
	n := len(w.buf)
	b := extend(w.buf, 4*len(v))
	d := b[n:]
	for i, x := range v {
		binary.BigEndian.PutUint32(d[4*i:], uint32(x))
	}
	w.buf = b
}

// WriteI16s writes the elements of an i16 list.
func (w *BinaryWriter) WriteI16s(v []int16) {
	if len(w.buf)+2*len(v) > w.lim && w.past(&w.buf, 2*len(v)) {
		return
	}
	n := len(w.buf)
	b := extend(w.buf, 2*len(v))
	d := b[n:]
	for i, x := range v {
		binary.BigEndian.PutUint16(d[2*i:], uint16(x))
	}
	w.buf = b
}

// WriteDoubles writes the elements of a double list.
func (w *BinaryWriter) WriteDoubles(v []float64) {
	if len(w.buf)+8*len(v) > w.lim && w.past(&w.buf, 8*len(v)) {
		return
	}
	n := len(w.buf)
	b := extend(w.buf, 8*len(v))
	d := b[n:]
	for i, x := range v {
		binary.BigEndian.PutUint64(d[8*i:], math.Float64bits(x))
	}
	w.buf = b
}

// WriteI8s writes the elements of a byte list.
func (w *BinaryWriter) WriteI8s(v []int8) {
	if len(w.buf)+len(v) > w.lim && w.past(&w.buf, len(v)) {
		return
	}
	w.buf = append(w.buf, int8Bytes(v)...)
}

// WriteBools writes the elements of a bool list.
func (w *BinaryWriter) WriteBools(v []bool) {
	if len(w.buf)+len(v) > w.lim && w.past(&w.buf, len(v)) {
		return
	}
	n := len(w.buf)
	b := extend(w.buf, len(v))
	d := b[n:]
	for i, x := range v {
		var c byte
		if x {
			c = 1
		}
		d[i] = c
	}
	w.buf = b
}

// WriteBinaries writes the elements of a binary list.
func (w *BinaryWriter) WriteBinaries(v [][]byte) {
	if w.json { // JSON must see each value (SplitsBinary)
		for _, x := range v {
			w.WriteBinary(x)
		}
		return
	}
	b, lim := w.buf, w.lim // locals: no store back to w per element
	for i, x := range v {
		if len(b)+4+len(x) > lim { // the limit (enclimit.go): value by value from here
			w.buf = b
			for _, x := range v[i:] {
				w.WriteBinary(x)
			}
			return
		}
		b = append(binary.BigEndian.AppendUint32(b, uint32(len(x))), x...)
	}
	w.buf = b
}

// WriteStrings writes the elements of a string list.
func (w *BinaryWriter) WriteStrings(v []string) {
	b, lim := w.buf, w.lim // locals: no store back to w per element
	for i, x := range v {
		if len(b)+4+len(x) > lim { // the limit (enclimit.go): value by value from here
			w.buf = b
			for _, x := range v[i:] {
				w.WriteString(x)
			}
			return
		}
		b = append(binary.BigEndian.AppendUint32(b, uint32(len(x))), x...)
	}
	w.buf = b
}

// fixed consumes n bytes holding a run of fixed-size values.
func (r *BinaryReader) fixed(n int) ([]byte, error) {
	p := r.pos
	if p < 0 || n > len(r.buf)-p {
		return nil, r.truncated()
	}
	r.pos = p + n
	return r.buf[p : p+n], nil
}

// ReadI64s fills dst with the elements of an i64 list.
func (r *BinaryReader) ReadI64s(dst []int64) error {
	src, err := r.fixed(8 * len(dst))
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = int64(binary.BigEndian.Uint64(src[8*i:]))
	}
	return nil
}

// ReadI32s fills dst with the elements of an i32 list.
func (r *BinaryReader) ReadI32s(dst []int32) error {
	src, err := r.fixed(4 * len(dst))
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = int32(binary.BigEndian.Uint32(src[4*i:]))
	}
	return nil
}

// ReadI16s fills dst with the elements of an i16 list.
func (r *BinaryReader) ReadI16s(dst []int16) error {
	src, err := r.fixed(2 * len(dst))
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = int16(binary.BigEndian.Uint16(src[2*i:]))
	}
	return nil
}

// ReadDoubles fills dst with the elements of a double list.
func (r *BinaryReader) ReadDoubles(dst []float64) error {
	src, err := r.fixed(8 * len(dst))
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = math.Float64frombits(binary.BigEndian.Uint64(src[8*i:]))
	}
	return nil
}

// ReadI8s fills dst with the elements of a byte list.
func (r *BinaryReader) ReadI8s(dst []int8) error {
	src, err := r.fixed(len(dst))
	if err != nil {
		return err
	}
	copy(int8Bytes(dst), src)
	return nil
}

// ReadBools fills dst with the elements of a bool list (any non-zero byte
// is true, as in ReadBool).
func (r *BinaryReader) ReadBools(dst []bool) error {
	src, err := r.fixed(len(dst))
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = src[i] != 0
	}
	return nil
}

// rawList fills dst with the elements of a string or binary list as
// sub-slices of the input, validated exactly as rawBytes does.
func (r *BinaryReader) rawList(dst [][]byte) error {
	p, buf, maxLen := r.pos, r.buf, r.lim.MaxStringLength
	for i := range dst {
		if p >= 0 && p+4 <= len(buf) {
			n := int(int32(binary.BigEndian.Uint32(buf[p : p+4])))
			if n >= 0 && n <= maxLen && n <= len(buf)-p-4 {
				e := p + 4 + n
				dst[i] = buf[p+4 : e : e]
				p = e
				continue
			}
		}
		// Let rawBytes report the exact error.
		r.pos = p
		b, err := r.rawBytes()
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
func (r *BinaryReader) ReadBinaries(dst [][]byte) error {
	if r.base64 {
		for i := range dst {
			var err error
			if dst[i], err = r.ReadBinary(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := r.rawList(dst); err != nil {
		return err
	}
	if !r.Alias {
		copyOut(dst)
	}
	return nil
}

// copyOut replaces every slice of dst with a copy in one shared block.
func copyOut(dst [][]byte) {
	total := 0
	for _, b := range dst {
		total += len(b)
	}
	block := make([]byte, total)
	o := 0
	for i, b := range dst {
		n := copy(block[o:], b)
		dst[i] = block[o : o+n : o+n]
		o += n
	}
}

// ReadStrings fills dst with the elements of a string list, copied unless
// UnsafeStrings.
func (r *BinaryReader) ReadStrings(dst []string) error {
	p, buf, maxLen := r.pos, r.buf, r.lim.MaxStringLength
	for i := range dst {
		var b []byte
		if p >= 0 && p+4 <= len(buf) {
			n := int(int32(binary.BigEndian.Uint32(buf[p : p+4])))
			if n >= 0 && n <= maxLen && n <= len(buf)-p-4 {
				e := p + 4 + n
				b = buf[p+4 : e]
				p = e
			}
		}
		if b == nil {
			r.pos = p
			var err error
			if b, err = r.rawBytes(); err != nil {
				return err
			}
			if err := r.checkText(len(b)); err != nil {
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
