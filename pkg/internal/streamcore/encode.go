package streamcore

import (
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// AppendMsg appends msg, one data message, encoded in p to b, a frame
// whose header is b's first wire.HeaderSize bytes and whose bytes after
// it (a server's header block) count towards the message limit limit
// with the message. Large binary values are left out as refs
// (wire.Codec.AppendStructRefs); size is the frame's payload, refs
// included.
//
// The message is encoded within the limit, as a unary reply is: past it
// the encoder keeps nothing more and only counts (wire.Codec.SetLimit),
// so a message of 1 GB against a 64 MiB limit costs a buffer of about
// the limit, where it was built whole and refused after. Such a message
// gets a *stream.TooLargeError naming its whole size, and b's bytes come
// back as they were: nothing was sent, nor any credit taken, so the
// stream goes on. Any other error is the message's encoding's.
func AppendMsg(codec *wire.Codec, b []byte, p proto.Protocol, msg proto.Struct, limit int) (out []byte, refs []proto.Ref, size int64, err error) {
	pre := len(b) - wire.HeaderSize
	// At least 1: 0 would be no limit. A header block past the limit on
	// its own is refused below by the whole size.
	codec.SetLimit(max(limit-pre, 1))
	out, refs, err = codec.AppendStructRefs(b, p, msg)
	if tl, ok := err.(*proto.TooLargeError); ok {
		return out, nil, int64(pre + tl.Size), &stream.TooLargeError{Size: pre + tl.Size, Limit: limit}
	}
	if err != nil {
		return out, nil, 0, err
	}
	size = int64(len(out) + proto.RefsLen(refs) - wire.HeaderSize)
	if size > int64(limit) {
		return out[:len(b)], nil, size, &stream.TooLargeError{Size: int(size), Limit: limit}
	}
	return out, refs, size, nil
}
