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

// short is str for 1 to 16 bytes at the start of src, copied as one
// 16-byte store. Map keys are hashed right after they are decoded, and
// the hash loads 16 bytes from the key's start: when the key was written
// by smaller stores, as copy writes short strings, that load cannot be
// forwarded from the store buffer and stalls until the stores retire.
// The bytes stored past the string's end are unused chunk space.
func (a *strArena) short(src *[16]byte, n int) string {
	off := a.off
	if off < 0 || off+16 > len(a.chunk) {
		a.chunk, off = make([]byte, arenaChunk), 0
	}
	d := (*[16]byte)(a.chunk[off : off+16])
	*d = *src
	a.off = off + n
	return unsafe.String(&d[0], n)
}
