package proto

import "unsafe"

// Decoded strings must not share the input's memory (unless UnsafeStrings),
// so each one is a copy; one allocation per small string is what made maps
// with string keys slow to decode. Readers instead copy short strings into a
// shared chunk and hand out immutable views of it: the bytes behind a string
// handed out are never written again, because the chunk is only ever filled
// forward and a full chunk is dropped, not reused. The cost is retention: a
// live string keeps its whole chunk (at most arenaChunk bytes) reachable.
const (
	arenaChunk     = 1024
	arenaMaxString = 32 // longer strings get their own allocation
)

// strArena lives inside its reader, which therefore must not be copied once
// used: two copies filling one chunk from separate offsets would overwrite
// each other's strings. noCopy makes go vet flag copies.
type strArena struct {
	_     noCopy
	chunk []byte
	// off is the start of chunk's unused tail. Advancing an int rather than
	// reslicing chunk matters: a pointer store into the (heap) reader costs
	// a GC write barrier, and decoders that allocate keep the GC busy.
	off int
}

// str returns a copy of b as a string, from a's chunk when short.
func (a *strArena) str(b []byte) string {
	n := len(b)
	if n == 0 || n > arenaMaxString {
		return string(b)
	}
	off := a.off
	if off < 0 || off+n > len(a.chunk) {
		a.chunk, off = make([]byte, arenaChunk), 0
	}
	d := a.chunk[off : off+n : off+n]
	a.off = off + n
	copy(d, b)
	return unsafe.String(&d[0], n)
}

// noCopy is recognised by go vet's copylocks check.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
