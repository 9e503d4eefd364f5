package hatkv

import (
	"context"
	"fmt"
	"io"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/metadata"
)

// WireStream is a streamed scan (ScanStream) read as WireBatches: records
// in wire form, no map built per record. Read it to the end (io.EOF) or
// cancel its context, as any stream.
type WireStream interface {
	// Recv decodes the next message into b, replacing its records: io.EOF
	// after the last, else the InvalidArgument or error the stream ended
	// with. b's records are valid until the next Recv into it.
	Recv(b *WireBatch) error
	// Header waits for the server's header metadata.
	Header() (metadata.MD, error)
	// Trailer is the server's trailer metadata, complete once the stream ended.
	Trailer() metadata.MD
	// Context is the stream's context: it ends when the stream does.
	Context() context.Context
}

// scanStreamMethod is ScanStream as the generated client opens it (its
// method table is unexported): TestScanStreamMethodMatchesIDL keeps the
// two in step.
var scanStreamMethod = client.Method{Service: "HatKV", Name: "ScanStream", Hints: hatkv.HatKVHints.Function("ScanStream"), Stream: hatkv.HatKVHints.Function("ScanStream").Stream}

// ScanStreamWire is KV's ScanStream read as WireBatches: the same
// request, the same messages on the wire (and the same route: TCP, or a
// lane where the plan puts the stream), decoded without a map per record.
func (c *Client) ScanStreamWire(ctx context.Context, req *hatkv.ScanRequest) (WireStream, error) {
	conn := c.conns[(c.next.Add(1)-1)%uint64(len(c.conns))]
	ws := &wireStream{res: *hatkv.NewHatKVScanStreamResult()}
	s, err := conn.NewStream(ctx, &scanStreamMethod, &ws.res)
	if err != nil {
		return nil, err
	}
	ws.Stream = s
	// io.EOF: the server already ended the stream; Recv says how (as the
	// generated ScanStream).
	if err := s.SendMsg(req); err != nil && err != io.EOF {
		return nil, err
	}
	if err := s.CloseSend(); err != nil && err != io.EOF {
		return nil, err
	}
	return ws, nil
}

// wireStream is one server's WireStream.
type wireStream struct {
	client.Stream
	res hatkv.HatKVScanStreamResult // the closing message: a declared exception, if any
}

func (w *wireStream) Recv(b *WireBatch) error {
	err := w.RecvMsg(b)
	if err == io.EOF && w.res.Bad != nil {
		return w.res.Bad
	}
	return err
}

// ScanStreamWire is Cluster's ScanStream read as WireBatches. With one
// server the records come as that server sent them (Client.ScanStreamWire);
// several servers' streams are merged in key order from their decoded
// records (ScanStream), which the batches carry in wire form again.
func (c *Cluster) ScanStreamWire(ctx context.Context, req *hatkv.ScanRequest) (WireStream, error) {
	if len(c.servers) == 1 {
		cl, err := c.client(ctx, 0)
		if err != nil {
			return nil, err
		}
		c.ops[0].Add(1)
		return cl.ScanStreamWire(ctx, req)
	}
	st, err := c.ScanStream(ctx, req)
	if err != nil {
		return nil, err
	}
	return WireOf(st), nil
}

// WireOf reads a stream of decoded batches (any HatKVScanStreamClient) as
// a WireStream, each record re-encoded in wire form (names sorted).
func WireOf(st hatkv.HatKVScanStreamClient) WireStream { return decodedWire{st} }

type decodedWire struct {
	hatkv.HatKVScanStreamClient
}

func (d decodedWire) Recv(b *WireBatch) error {
	m, err := d.HatKVScanStreamClient.Recv()
	if err != nil {
		return err
	}
	b.reset()
	for i, kr := range m.GetRecords() {
		if kr == nil {
			return fmt.Errorf("hatkv: scan stream: record %d of the batch is nil", i)
		}
		b.appendRecord(kr.Key, kr.Record)
	}
	b.cut()
	return nil
}
