package fastpath

import (
	"net"
	"sync"
)

// GoAway is the one byte a server writes on a lane's link when it drains:
// the client stops starting calls on that lane. Any other byte, or the link
// closing, means the peer is gone.
const GoAway = 'G'

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
	l := &Link{nc: nc, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		var b [1]byte
		for {
			n, err := nc.Read(b[:])
			if n == 1 && b[0] == GoAway && err == nil {
				if goAway != nil {
					goAway()
				}
				continue
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

// Close closes the link and waits for its reader.
func (l *Link) Close() {
	l.once.Do(func() { _ = l.nc.Close() })
	<-l.done
}
