package server

import "github.com/hatrpc/hatrpc/pkg/proto"

// streamWriter is where a connection's stream frames go: its TCP writer
// (*wire.Writer), or the outbox of the lane carrying its stream
// (stream_lane.go), whose exchanges take them.
type streamWriter interface {
	// WriteStream writes a stream frame in order with the stream's
	// others, batched with what is queued when burst (wire.Writer).
	WriteStream(head []byte, refs []proto.Ref, burst bool) error
}

// ownedWriter is a streamWriter that can take the buffer a frame was
// encoded in and queue the frame there (wire.Writer.WriteStreamOwned): a
// connection's writer, not a lane's outbox, whose exchanges copy what
// they carry anyway.
type ownedWriter interface {
	WriteStreamOwned(bp *[]byte, burst bool) error
}

// countTCP counts n bytes of the stream's frames sent over TCP; a lane
// counts what its replies carry itself.
func (ss *serverStream) countTCP(n int64) {
	if ss.w == streamWriter(ss.c.w) {
		ss.c.s.met.io(ss.c.shard).out[ioTCP].Add(uint64(n))
	}
}
