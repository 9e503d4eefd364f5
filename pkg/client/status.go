package client

import (
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/status"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// StatusCode makes status.Code(err) Unavailable for a call that failed
// on its connection: the server could not be reached or the connection
// broke.
func (e *ConnError) StatusCode() codes.Code { return codes.Unavailable }

// withStatus returns the status error the reply's headers give an
// application exception (pkg/status), err itself otherwise. head is the
// reply's bytes before its Thrift message: a HatRPC frame header and
// header block, or a THeader head. Only exceptions look: a successful
// reply costs nothing.
func (s *session) withStatus(err error, head []byte) error {
	ae, ok := err.(*proto.ApplicationException)
	if !ok {
		return err
	}
	var md metadata.MD
	switch {
	case s.format.Header:
		h, _, herr := wire.ParseTHeaderHead(head)
		if herr != nil {
			return err
		}
		md = h.Info
	case len(head) > wire.HeaderSize:
		var herr error
		if md, _, herr = wire.ParseHeaderBlock(head[wire.HeaderSize:]); herr != nil {
			return err
		}
	default:
		return err
	}
	if st := status.FromReply(ae, md); st != nil {
		return st
	}
	return err
}

// withLaneStatus is withStatus for a lane or FLOCK reply frame resp.
func withLaneStatus(err error, resp []byte, flags uint8) error {
	ae, ok := err.(*proto.ApplicationException)
	if !ok || flags&wire.FlagHeaders == 0 {
		return err
	}
	md, _, herr := wire.ParseHeaderBlock(resp[wire.HeaderSize:])
	if herr != nil {
		return err
	}
	if st := status.FromReply(ae, md); st != nil {
		return st
	}
	return err
}
