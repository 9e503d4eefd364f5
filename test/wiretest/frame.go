package wiretest

import (
	"time"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Frame encodes one HatRPC frame as lanes carry them: body as a Thrift
// message of type typ in protocol p, with md as its header block if not
// nil, sealed as kind (its header's seqid and timeout as given).
func Frame(p proto.Protocol, kind wire.Kind, typ proto.MessageType, name string, seqid int32, timeout time.Duration, md metadata.MD, body proto.Struct) ([]byte, error) {
	b, flags := make([]byte, wire.HeaderSize, 512), uint8(0)
	if md != nil {
		b, flags = wire.AppendHeaderBlock(b, md), wire.FlagHeaders
	}
	if p == proto.Compact {
		flags |= wire.FlagCompact
	}
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	b, err := codec.AppendMessage(b, p, name, typ, seqid, body)
	if err != nil {
		return nil, err
	}
	wire.SealFrame(b, kind, flags, seqid, timeout)
	return b, nil
}
