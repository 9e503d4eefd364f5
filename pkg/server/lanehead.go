//go:build cgo && linux

package server

import (
	"encoding/binary"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// A dedicated lane carries one function's calls under a fixed seqid, so
// its requests start with the same bytes every time but for the timeout:
// the frame header's kind, flags and seqid, and the Thrift message header
// (type, name, seqid). Checking the frame header, parsing the message
// header and matching the name cost ~35 ns of a 64 B call
// (BenchmarkLaneRequestHead); comparing them with the last plain call's
// bytes costs a few. A call whose bytes differ (headers, another
// function, another protocol, garbage) takes the full path, which checks
// everything.

// reqHead is the head of a lane's last plain call (a two-way call, so
// its message type is Call): bytes 4–12 of its frame header and its
// message header, what of them a call needs (its protocol, from the frame
// header's flags; the message's seqid and where its body starts), and the
// method it named in the method table tab. The FLOCK session learns none.
type reqHead struct {
	bytes []byte
	p     proto.Protocol
	seqid int32 // the message header's
	body  int   // the message's body, from the end of the frame header
	m     *method
	tab   *map[string]*method
}

// knownHead tells whether req is a call with the lane's plain call's
// head (what the full path would accept as that call), and then the
// method it names and its timeout; its protocol, seqid and body are the
// learned head's (ls.head). ok false: take the full path.
func (ls *laneSession) knownHead(req []byte, maxPayload int) (m *method, timeout time.Duration, ok bool) {
	k := &ls.head
	n := len(k.bytes)
	if n == 0 || len(req) < wire.HeaderSize+k.body || len(req)-wire.HeaderSize > maxPayload ||
		int64(binary.BigEndian.Uint32(req)) != int64(len(req)-4) || k.tab != ls.c.s.methods.Load() ||
		string(req[4:12]) != string(k.bytes[:8]) || string(req[wire.HeaderSize:wire.HeaderSize+k.body]) != string(k.bytes[8:]) {
		return nil, 0, false
	}
	timeout = time.Duration(binary.BigEndian.Uint64(req[12:]))
	if timeout < 0 {
		return nil, 0, false // the full path refuses it
	}
	return k.m, timeout, true
}

// learnHead keeps the head of req, a call the full path decoded into h
// and mh naming m, when it is a plain one: a two-way call of a known
// method without call headers.
func (ls *laneSession) learnHead(req []byte, h wire.Header, mh wire.MsgHeader, m *method) {
	if m == nil || ls.l.viaFLOCK || h.Kind != wire.KindCall || mh.Type != proto.Call || h.Flags&wire.FlagHeaders != 0 {
		return
	}
	k := &ls.head
	k.bytes = append(append(k.bytes[:0], req[4:12]...), req[wire.HeaderSize:wire.HeaderSize+mh.Body]...)
	k.p = h.Protocol()
	k.seqid, k.body, k.m, k.tab = mh.Seqid, mh.Body, m, ls.mc.tab
}
