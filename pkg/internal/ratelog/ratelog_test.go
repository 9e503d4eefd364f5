package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimiter(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})), time.Second)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	steps := []struct {
		advance time.Duration
		msg     string
		n       int // events
	}{
		{0, "refused", 1000},                   // one line, 999 counted
		{0, "other", 1},                        // its own line
		{999 * time.Millisecond, "refused", 5}, // still within the interval
		{time.Millisecond, "refused", 1},       // a line with the 1,004 counted
		{10 * time.Second, "refused", 1},       // a line, nothing counted
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		for i := range s.n {
			l.Warn(s.msg, "remote", "127.0.0.1", "i", i)
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Equal(t, []string{
		"level=WARN msg=refused remote=127.0.0.1 i=0",
		"level=WARN msg=other remote=127.0.0.1 i=0",
		"level=WARN msg=refused remote=127.0.0.1 i=0 suppressed=1004",
		"level=WARN msg=refused remote=127.0.0.1 i=0",
	}, lines)
}

func TestLimiterDisabledLevel(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError})), time.Second)
	l.Warn("x")
	l.Info("y")
	assert.Empty(t, buf.String())
	assert.Empty(t, l.state, "a disabled level keeps no state")
}

func TestLimiterBoundedKeys(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	for i := range 3 * maxKeys {
		l.Warn(strings.Repeat("m", i%(2*maxKeys)+1))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.LessOrEqual(t, len(l.state), maxKeys)
}
