package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// noArgs is an empty argument struct.
type noArgs struct{}

func (noArgs) EncodeBinary(w *proto.BinaryWriter) error   { w.WriteFieldStop(); return nil }
func (noArgs) DecodeBinary(r *proto.BinaryReader) error   { return r.Skip(proto.STRUCT) }
func (noArgs) EncodeCompact(w *proto.CompactWriter) error { w.WriteFieldStop(); return nil }
func (noArgs) DecodeCompact(r *proto.CompactReader) error { return r.Skip(proto.STRUCT) }

// TestNoReadAfterWriteFailure: once a reply could not be written, the
// reader takes in no more calls, not even those already in its buffer
// (16 KiB of small calls is hundreds): each would build a reply nobody
// can receive. Eight connections that pipelined fb303 getCounters and
// then closed took a server from 263 to 740 MB that way (issue 43). And
// the memory of the replies it was owed is given back.
func TestNoReadAfterWriteFailure(t *testing.T) {
	s := New(WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	s.Register(&Service{Name: "S", Methods: []Method{{Name: "m",
		NewArgs: func() proto.Struct { return noArgs{} },
		Handle:  func(context.Context, proto.Struct) (proto.Struct, error) { return nil, nil }}}})
	cli, srv := net.Pipe()
	defer cli.Close()
	c := newConn(s, srv)
	defer c.handoff.Stop()

	// Two framed calls in one write: the reader's first read takes both.
	var out []byte
	codec := wire.GetCodec()
	for seq := int32(1); seq <= 2; seq++ {
		start := len(out)
		var err error
		out, err = codec.AppendMessage(append(out, 0, 0, 0, 0), proto.Binary, "m", proto.Call, seq, noArgs{})
		require.NoError(t, err)
		binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	}
	wire.PutCodec(codec)
	wrote := make(chan error, 1)
	go func() {
		_ = cli.SetWriteDeadline(time.Now().Add(testenv.HangGuard(time.Minute)))
		_, err := cli.Write(out)
		wrote <- err
	}()

	r, err := c.next(&kit{}, c.nextBuffered())
	require.NoError(t, err)
	require.NotNil(t, r)
	assert.Equal(t, int32(1), r.seqid)
	require.NoError(t, <-wrote)
	require.Positive(t, c.br.Buffered(), "the second call is in the read buffer")
	c.freeRequest(r)

	c.checkWrite(errors.New("write: connection reset by peer"))
	r, err = c.next(&kit{}, c.nextBuffered())
	assert.Nil(t, r)
	require.ErrorIs(t, err, errWriteFailed)
	assert.ErrorIs(t, err, net.ErrClosed)

	// The replies the connection was owed are given back to the OS.
	require.Eventually(t, func() bool { return s.budget.gives.Load() > 0 }, testenv.HangGuard(time.Minute), 5*time.Millisecond)
	s.budget.stop()
}

// TestGiveBackAgainAfterWriteFailure: a failed connection's replies are
// dropped as its calls end, after the give-back its failure kicked may
// have run: memory is given back once more when the budget next empties,
// however small the replies released (small ones kick no give-back of
// their own).
func TestGiveBackAgainAfterWriteFailure(t *testing.T) {
	s := New(WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer s.budget.stop()
	cli, srv := net.Pipe()
	defer cli.Close()
	c := newConn(s, srv)
	defer c.handoff.Stop()
	owed := &conn{s: s, ctx: context.Background()}
	require.NoError(t, s.budget.acquire(owed, 100, 0)) // a small reply still held

	c.checkWrite(errors.New("write: connection reset by peer"))
	require.Eventually(t, func() bool { return s.budget.gives.Load() == 1 }, testenv.HangGuard(time.Minute), time.Millisecond)
	s.budget.release(owed, 100) // the budget empties: once more
	require.Eventually(t, func() bool { return s.budget.gives.Load() == 2 }, testenv.HangGuard(time.Minute), time.Millisecond)
}
