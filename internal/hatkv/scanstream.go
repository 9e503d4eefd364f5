package hatkv

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/pkg/metadata"
)

// mergedBatch is the most records a merged ScanStream message carries
// when the request names no batch: about the 64 KiB a server's message
// holds of 1 KB YCSB records.
const mergedBatch = 64

// ScanStream implements KV: every server streams its part of the range
// and the records come out merged in key order (what one server holding
// every key would stream), each server's batches read from snapshots of
// their own. Memory is one batch per server, plus each stream's window.
// A server's failure ends the stream with an error naming it. As any
// stream, read it to the end (io.EOF) or cancel ctx.
func (c *Cluster) ScanStream(ctx context.Context, req *hatkv.ScanRequest) (hatkv.HatKVScanStreamClient, error) {
	if len(c.servers) == 1 {
		c.ops[0].Add(1)
		return c.kvAt(ctx, 0).ScanStream(ctx, req)
	}
	mctx, cancel := context.WithCancelCause(ctx)
	m := &mergedScan{ctx: mctx, cancel: cancel, addrs: c.addrs, limit: req.GetLimit(), batch: mergedBatch}
	if req.GetBatchRecords() > 0 {
		m.batch = int(req.GetBatchRecords())
	}
	for i := range c.servers {
		c.ops[i].Add(1)
		s, err := c.kvAt(mctx, i).ScanStream(mctx, req)
		if err != nil {
			cancel(err)
			return nil, c.firstErr("scan stream", append(make([]error, i), err))
		}
		m.parts = append(m.parts, &mergePart{s: s})
	}
	return m, nil
}

// mergedScan merges servers' ScanStreams in key order.
type mergedScan struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	addrs  []string
	parts  []*mergePart
	limit  int64
	sent   int64
	batch  int
	err    error // the stream's end, once reached
}

// mergePart is one server's stream and what is left of its last batch.
type mergePart struct {
	s    hatkv.HatKVScanStreamClient
	recs []*hatkv.KeyRecord
	done bool
}

// fill makes sure p has a record unless its stream ended.
func (p *mergePart) fill() error {
	for len(p.recs) == 0 && !p.done {
		b, err := p.s.Recv()
		if err == io.EOF {
			p.done = true
			return nil
		}
		if err != nil {
			return err
		}
		p.recs = b.GetRecords()
	}
	return nil
}

// Recv returns the next records in key order; io.EOF after the last.
func (m *mergedScan) Recv() (*hatkv.ScanBatch, error) {
	out := hatkv.NewScanBatch()
	if err := m.RecvInto(out); err != nil {
		return nil, err
	}
	return out, nil
}

// RecvInto is Recv into out, whose record slice it reuses.
func (m *mergedScan) RecvInto(out *hatkv.ScanBatch) error {
	recs := out.Records[:0]
	clear(out.Records)
	*out = *hatkv.NewScanBatch()
	out.Records = recs
	if m.err != nil {
		return m.err
	}
	for len(out.Records) < m.batch && (m.limit == 0 || m.sent < m.limit) {
		var lo *mergePart
		for i, p := range m.parts {
			if err := p.fill(); err != nil {
				return m.end(fmt.Errorf("hatkv: scan stream on %s: %w", m.addrs[i], err))
			}
			if len(p.recs) > 0 && (lo == nil || p.recs[0].Key < lo.recs[0].Key) {
				lo = p
			}
		}
		if lo == nil {
			break
		}
		out.Records = append(out.Records, lo.recs[0])
		lo.recs[0] = nil
		lo.recs = lo.recs[1:]
		m.sent++
	}
	if len(out.Records) == 0 {
		return m.end(io.EOF)
	}
	return nil
}

// end records how the stream ended and releases the servers' streams
// (those still open when a limit or an error ended it early).
func (m *mergedScan) end(err error) error {
	m.err = err
	for _, p := range m.parts {
		p.recs = nil // the streams stay, for their trailers
	}
	m.cancel(errors.New("hatkv: merged scan stream ended"))
	return err
}

// Header waits for every server's header metadata and merges them.
func (m *mergedScan) Header() (metadata.MD, error) {
	var md metadata.MD
	for _, p := range m.parts {
		h, err := p.s.Header()
		if err != nil {
			return nil, err
		}
		md = joinMD(md, h)
	}
	return md, nil
}

// Trailer merges the servers' trailers.
func (m *mergedScan) Trailer() metadata.MD {
	var md metadata.MD
	for _, p := range m.parts {
		md = joinMD(md, p.s.Trailer())
	}
	return md
}

// Context is the merged stream's context.
func (m *mergedScan) Context() context.Context { return m.ctx }

func joinMD(dst, src metadata.MD) metadata.MD {
	for k, v := range src {
		if dst == nil {
			dst = metadata.MD{}
		}
		dst[k] = v // servers answer alike; the last one's stays
	}
	return dst
}
