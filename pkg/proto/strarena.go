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
// used: two copies appending to one chunk through separate slice headers
// would overwrite each other's strings. noCopy makes go vet flag copies.
type strArena struct {
	_    noCopy
	free []byte // unused tail of the current chunk
}

// arenaString returns a copy of b as a string, from a's chunk when short.
func (a *strArena) str(b []byte) string {
	n := len(b)
	if n == 0 || n > arenaMaxString {
		return string(b)
	}
	if len(a.free) < n {
		a.free = make([]byte, arenaChunk)
	}
	d := a.free[:n:n]
	a.free = a.free[n:]
	copy(d, b)
	return unsafe.String(&d[0], n)
}

// noCopy is recognised by go vet's copylocks check.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
