package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// silentConns is D6: c.conns connections (1,280 by default) from
// c.sources loopback addresses (127.0.1.1 on) that never send a byte,
// held in the server's handshake for the attack; run it with -redial so
// the legitimate client (from 127.0.0.1) connects for every Get.
func silentConns(c config, track func(net.Conn), _ <-chan struct{}) (func() string, error) {
	n := c.conns
	if n == 0 {
		n = 1280
	}
	var open int
	for i := range n {
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(i%max(c.sources, 1)+1))}
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: src}
		nc, err := d.Dial("tcp", c.addr)
		if err != nil {
			return nil, fmt.Errorf("silent connection %d from %v: %w", i, src.IP, err)
		}
		track(nc)
		open++
	}
	return func() string {
		return fmt.Sprintf("%d silent connections from %d addresses", open, c.sources)
	}, nil
}

// tokenMagic is hatkv's token preamble (internal/hatkv/auth.go).
const tokenMagic = "HATKVTK1"

// tokenGuess is D7: wrong tokens, one connection each, from 127.0.0.1
// as fast as the server answers, until stop.
func tokenGuess(c config, track func(net.Conn), stop <-chan struct{}) (func() string, error) {
	var tries, refused, closed atomic.Int64
	t0 := time.Now()
	guess := func(i int64) {
		nc, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
		if err != nil {
			closed.Add(1)
			return
		}
		defer nc.Close()
		tok := fmt.Appendf(nil, "guess-%012d", i)
		msg := binary.BigEndian.AppendUint16([]byte(tokenMagic), uint16(len(tok)))
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		var ans [1]byte
		if _, err := nc.Write(append(msg, tok...)); err == nil {
			_, err = io.ReadFull(nc, ans[:])
			if err == nil && ans[0] != 0 {
				refused.Add(1)
				return
			}
			if err == nil {
				return // accepted: counted in neither
			}
		}
		closed.Add(1)
	}
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			guess(tries.Add(1))
		}
	}()
	return func() string {
		s := time.Since(t0).Seconds()
		return fmt.Sprintf("%d wrong tokens in %.0f s (%.0f/s): %d answered refused, %d closed before an answer",
			tries.Load(), s, float64(tries.Load())/s, refused.Load(), closed.Load())
	}, nil
}
