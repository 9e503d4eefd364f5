package hatkv

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// dialFrom opens n silent connections to addr from the loopback address
// src (the handshake is never started, as an attacker holding places).
func dialFrom(t *testing.T, addr, src string, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: testenv.HangGuard(20 * time.Second)}
	out := make([]net.Conn, 0, n)
	for range n {
		c, err := d.Dial("tcp", addr)
		require.NoError(t, err)
		out = append(out, c)
	}
	return out
}

func (l *AuthListener) pendingCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// TestAuthListenerFairShares: silent connections from up to 64 loopback
// addresses fill every handshake place; a client from another address
// still gets a place (the address holding the most gives its oldest up)
// and is accepted.
func TestAuthListenerFairShares(t *testing.T) {
	cases := []struct{ addrs, each int }{
		{16, maxPendingAuthPerIP}, // the attack measured: 16 addresses fill the 1,024 places
		{64, maxPendingAuth / 64}, // 64 addresses, 16 places each
		{64, maxPendingAuthPerIP}, // 64 addresses over-asking: 4,096 for 1,024 places
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%dx%d", tc.addrs, tc.each), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			// The handshake limit is out of the way: what admits the
			// client is the fair share, not attackers timing out.
			al := newAuthListener(ln, nil, "s3cret", quietLogger(), nil, time.Hour)
			defer al.Close()
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for i := range tc.addrs {
				held = append(held, dialFrom(t, al.Addr().String(), fmt.Sprintf("127.0.0.%d", 2+i), tc.each)...)
			}
			want := min(tc.addrs*tc.each, maxPendingAuth)
			require.Eventually(t, func() bool { return al.pendingCount() == want && len(held) == tc.addrs*tc.each },
				testenv.HangGuard(60*time.Second), 5*time.Millisecond)
			accepted := make(chan net.Conn, 1)
			go func() {
				if c, err := al.Accept(); err == nil {
					accepted <- c
				}
			}()
			ctx := testCtx(t, 60*time.Second)
			start := time.Now()
			c, err := authDialer(nil, "s3cret")(ctx, al.Addr().String())
			require.NoError(t, err, "a client from a fresh address is let in")
			defer c.Close()
			select {
			case sc := <-accepted:
				sc.Close()
			case <-ctx.Done():
				t.Fatal("the client passed the token but was not accepted")
			}
			t.Logf("connected and accepted in %v with %d places held", time.Since(start), want)
		})
	}
}

// TestAuthListenerTokenBackoff: wrong tokens from one address are read
// at most authFailBurst at once and authFailRate a second after; past
// that its connections are closed before the token is read. Another
// address is not slowed.
func TestAuthListenerTokenBackoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	kinds := map[string]int{}
	al := newAuthListener(ln, nil, "s3cret", quietLogger(), func(kind string) {
		mu.Lock()
		kinds[kind]++
		mu.Unlock()
	}, time.Hour)
	defer al.Close()
	guess := func(src string) byte {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: testenv.HangGuard(20 * time.Second)}
		c, err := d.Dial("tcp", al.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.SetDeadline(time.Now().Add(testenv.HangGuard(30*time.Second))))
		tok := []byte("wrong")
		pre := append([]byte(tokenMagic), 0, 0)
		binary.BigEndian.PutUint16(pre[len(tokenMagic):], uint16(len(tok)))
		_, _ = c.Write(append(pre, tok...))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil {
			return 0xff // closed unanswered: not read
		}
		return b[0]
	}
	const n = 200
	start := time.Now()
	answered := 0
	for range n {
		if guess("127.0.0.9") == authRefused {
			answered++
		}
	}
	secs := time.Since(start).Seconds()
	assert.GreaterOrEqual(t, answered, authFailBurst)
	assert.LessOrEqual(t, float64(answered), authFailBurst+authFailRate*secs+1, "%d answered in %.2f s", answered, secs)
	mu.Lock()
	assert.Equal(t, answered, kinds["token"])
	assert.Equal(t, n-answered, kinds["token_backoff"])
	mu.Unlock()

	// Another address is read as usual, and the right token passes.
	assert.Equal(t, byte(authRefused), guess("127.0.0.10"))
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := al.Accept(); err == nil {
			accepted <- c
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	c, err := authDialer(nil, "s3cret")(ctx, al.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	select {
	case sc := <-accepted:
		sc.Close()
	case <-ctx.Done():
		t.Fatal("not accepted")
	}
}

// TestRefuseLogBounded: a flood of refusals logs at most a line a second,
// each with the number of refusals it stands for.
func TestRefuseLogBounded(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	r := refuseLog{every: rate.Sometimes{Interval: time.Second}}
	start := time.Now()
	for range 10000 {
		r.warn(log, "127.0.0.1:1", "wrong token")
	}
	secs := int(time.Since(start)/time.Second) + 1
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	assert.LessOrEqual(t, len(lines), secs+1)
	assert.Contains(t, lines[0], "hatkv: connection refused")
	assert.Contains(t, lines[0], "count=1")
}
