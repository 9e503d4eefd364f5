package wire

// Spare holds at most one small, empty message buffer for its owner's
// next message (a call record's request or reply, a serving turn's
// request, a codec's reply), so an owner that handles one message a use
// takes no buffer from the pool for it: each pool operation costs ~60
// instructions of a 64-caller 512 B call's ~10,000 (scripts/insn-ab.sh).
// Only small buffers are held, so a large message's memory goes back to
// its size class. The zero value is empty; a Spare is its owner's alone
// (not safe for concurrent use).
type Spare struct{ bp *[]byte }

// Get returns the held buffer, leaving s empty, or a pooled one.
func (s *Spare) Get() *[]byte {
	bp := s.bp
	if bp == nil {
		return poolBuf()
	}
	s.bp = nil
	return bp
}

// poolBuf is GetBuf out of line, which keeps Get small enough to be
// inlined where the spare is almost always there.
//
//go:noinline
func poolBuf() *[]byte { return GetBuf() }

// Hold keeps bp, emptied, if it is small and s holds none, and reports
// whether it did; the caller owns bp still when it did not.
func (s *Spare) Hold(bp *[]byte) bool {
	if s.bp != nil || bp == nil || !Small(bp) {
		return false
	}
	*bp = (*bp)[:0]
	s.bp = bp
	return true
}

// Keep disposes of bp, a buffer its owner is done with: held (Hold), or
// back to the pool.
func (s *Spare) Keep(bp *[]byte) {
	if !s.Hold(bp) {
		PutBuf(bp)
	}
}

// From moves o's buffer to s if s holds none: a buffer goes round
// between two owners (a caller's record and the read role) without the
// pool.
func (s *Spare) From(o *Spare) {
	if s.bp == nil && o.bp != nil {
		s.bp, o.bp = o.bp, nil
	}
}

// Release gives the held buffer, if any, back to the pool: for an owner
// that is going away.
func (s *Spare) Release() {
	if s.bp != nil {
		PutBuf(s.bp)
		s.bp = nil
	}
}
