package proto

// ReadFieldBegin cannot be inlined: its slow path is a call, and a call
// alone nearly uses up the inliner's budget. Generated decoders read each
// field header with ReadFieldBeginFast first, which has no call and so
// inlines, and fall back to ReadFieldBegin when it declines: a struct of
// many small fields then pays no call per field header.

// ReadFieldBeginFast reads a field header when it is a valid value header
// with the whole header present, and reports ok. Otherwise (STOP, errors,
// input ending) it consumes nothing and ReadFieldBegin must be called.
func (r *BinaryReader) ReadFieldBeginFast() (t Type, id int16, ok bool) {
	if p := r.pos; p >= 0 && p+3 <= len(r.buf) {
		b := r.buf[p : p+3]
		if t = Type(b[0]); validType[t] {
			r.pos = p + 3
			return t, int16(uint16(b[1])<<8 | uint16(b[2])), true
		}
	}
	return 0, 0, false
}

// ReadFieldBeginFast reads a field header in the short form (a delta id)
// with a valid type, and reports ok. Otherwise (STOP, a long-form header,
// errors, input ending) it consumes nothing and ReadFieldBegin must be
// called.
func (r *CompactReader) ReadFieldBeginFast() (t Type, id int16, ok bool) {
	if p := r.pos; uint(p) < uint(len(r.buf)) {
		b := r.buf[p]
		if t = fastField[b]; t != 0 {
			r.pos = p + 1
			id = r.last + int16(b>>4)
			r.last = id
			if t == BOOL {
				r.boolSet, r.boolVal = true, b&0x0f == cTrue
			}
			return t, id, true
		}
	}
	return 0, 0, false
}
