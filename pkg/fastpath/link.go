package fastpath

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
)

// GoAway is the one byte a server writes on a lane's link when it drains:
// the client stops starting calls on that lane. Any other byte, or the link
// closing, means the peer is gone.
const GoAway = 'G'

// Cancel is the byte a client writes on a lane's link, followed by a
// 4-byte big-endian stream number, to cancel the stream of that number
// the lane carries (the lane's streams are numbered from 1, in the order
// their opens went on it) while it waits for a reply the server holds
// (docs/design/streams-lanes.md: a lane is one exchange at
// a time, so the cancel cannot go on the lane itself). A server that does
// not know it takes it for the peer gone, and the lane closes: a client
// sends it only to a server that granted wire.CapLaneCancel.
const Cancel = 'C'

// Link is a lane's liveness link: the bootstrap connection, kept open and
// read by one goroutine for the lane's lifetime.
type Link struct {
	nc   net.Conn
	done chan struct{}
	once sync.Once
}

// Watch starts reading nc. goAway runs when the peer says it drains; dead
// runs (once) when the link fails for any other reason, including Close.
func Watch(nc net.Conn, goAway, dead func()) *Link {
	return WatchCancels(nc, goAway, nil, dead)
}

// WatchCancels is Watch for a server's lane: cancel (nil: none taken) runs
// with the stream number of each Cancel the client sends.
func WatchCancels(nc net.Conn, goAway func(), cancel func(stream uint32), dead func()) *Link {
	l := &Link{nc: nc, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		var b [5]byte
		for {
			n, err := nc.Read(b[:1])
			switch {
			case n == 1 && b[0] == GoAway && err == nil:
				if goAway != nil {
					goAway()
				}
				continue
			case n == 1 && b[0] == Cancel && cancel != nil:
				if _, err := io.ReadFull(nc, b[1:]); err == nil {
					cancel(binary.BigEndian.Uint32(b[1:]))
					continue
				}
			}
			dead()
			return
		}
	}()
	return l
}

// SendGoAway tells the peer to stop starting calls on the lane.
func (l *Link) SendGoAway() error {
	_, err := l.nc.Write([]byte{GoAway})
	return err
}

// SendCancel tells the server to cancel stream number stream of the lane
// (one write: a TCP connection's writes do not interleave).
func (l *Link) SendCancel(stream uint32) error {
	b := [5]byte{Cancel}
	binary.BigEndian.PutUint32(b[1:], stream)
	_, err := l.nc.Write(b[:])
	return err
}

// Close closes the link and waits for its reader.
func (l *Link) Close() {
	l.once.Do(func() { _ = l.nc.Close() })
	<-l.done
}
