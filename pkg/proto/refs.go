package proto

// Ref is a binary value a writer with SetRefs left out of its buffer
// instead of copying it: the encoded message is the buffer with Data
// inserted at offset Off (refs in order, offsets non-decreasing). A
// transport can then send the message with one vectored write straight
// from the caller's slices, saving the copy of every large value.
type Ref struct {
	Off  int
	Data []byte
}

// RefsLen is the number of bytes refs add to a writer's buffer.
func RefsLen(refs []Ref) int {
	n := 0
	for _, r := range refs {
		n += len(r.Data)
	}
	return n
}

// SetRefs makes WriteBinary record values of at least min bytes (min >= 1)
// in *refs, writing only their length prefix into the buffer; refs nil
// turns it off. The recorded slices are not copied: they must stay
// unchanged until the message is sent. Bytes then returns the message
// without those values. Reset keeps the setting.
func (w *BinaryWriter) SetRefs(refs *[]Ref, min int) { w.refs, w.refMin = refs, max(min, 1) }

// SetRefs is BinaryWriter.SetRefs for the compact protocol.
func (w *CompactWriter) SetRefs(refs *[]Ref, min int) { w.refs, w.refMin = refs, max(min, 1) }
