package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	gen "github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func TestCLI(t *testing.T) {
	addr := serveInProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	a := []string{"--addr", addr}

	steps := []struct {
		name    string
		stdin   string
		args    []string
		want    []string // substrings of the output, in order
		wantErr string
	}{
		{name: "put from args", args: []string{"put", "user1", "f0=hello", "f1=a=b"}, want: []string{"OK user1 (2 fields)"}},
		{name: "put from stdin lines", stdin: "x=1\n\ny=2\n", args: []string{"put", "user2"}, want: []string{"OK user2 (2 fields)"}},
		{name: "put one binary field from stdin", stdin: "\x00\x01raw", args: []string{"put", "user3", "--field", "blob"}, want: []string{"OK user3 (1 fields)"}},
		{name: "get all fields", args: []string{"get", "user1"}, want: []string{"f0=hello\nf1=a=b\n"}},
		{name: "get one field", args: []string{"get", "user2", "y"}, want: []string{"y=2\n"}},
		{name: "binary values are quoted", args: []string{"get", "user3"}, want: []string{`blob="\x00\x01raw"`}},
		{name: "scan", args: []string{"scan", "user2", "--count", "5"}, want: []string{"user2\n  x=1\n  y=2\n", "user3\n", "(2 records)"}},
		{name: "scan with fields", args: []string{"scan", "--fields", "f0"}, want: []string{"user1\n  f0=hello\nuser2\nuser3\n(3 records)"}},
		{name: "scan --all streams", args: []string{"scan", "--all"}, want: []string{"user1\n  f0=hello\n  f1=a=b\nuser2\n  x=1\n  y=2\nuser3\n", "(3 records)"}},
		{name: "scan FROM TO streams", args: []string{"scan", "user2", "user3"}, want: []string{"user2\n  x=1\n  y=2\n(1 records)"}},
		{name: "scan --all --count", args: []string{"scan", "--all", "--count", "2", "--fields", "y"}, want: []string{"user1\nuser2\n  y=2\n(2 records)"}},
		{name: "scan --all with keys", args: []string{"scan", "--all", "user1"}, wantErr: "scan --all takes no keys: give --all, or FROM TO"},
		{name: "scan TO before FROM", args: []string{"scan", "user3", "user1"}, wantErr: `bad scan range: end key "user1" is before start key "user3"`},
		{name: "del", args: []string{"del", "user2"}, want: []string{"deleted user2"}},
		{name: "get deleted", args: []string{"get", "user2"}, wantErr: `key "user2" not found`},
		{name: "del missing", args: []string{"del", "nope"}, wantErr: "not found"},
		{name: "empty key", args: []string{"put", "", "f=v"}, wantErr: "invalid argument: empty key"},
		{name: "bad pair", args: []string{"put", "k", "novalue"}, wantErr: `"novalue" is not FIELD=VALUE`},
		{name: "bad stdin line", stdin: "ok=1\nbroken\n", args: []string{"put", "k"}, wantErr: "stdin line 2"},
		{name: "no fields at all", args: []string{"put", "k"}, wantErr: "no fields"},
		{name: "scan count zero", args: []string{"scan", "-n", "0"}, wantErr: "invalid argument: scan count"},
		{name: "stats", args: []string{"stats"}, want: []string{"records", "2", "readers", "sync", "nosync", "commit", "group"}},
		{name: "other fast transport refused", args: []string{"get", "user1", "--transport", fastpathtest.OtherTransport()}, wantErr: "did not grant " + fastpathtest.OtherTransport() + " lanes (calls would run over tcp)"},
		{name: "get over the fast path", args: []string{"get", "user1", "--transport", fastpathtest.Transport()}, want: []string{"f0=hello"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			out, err := runCmd(ctx, strings.NewReader(s.stdin), append(s.args, a...)...)
			if s.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, describe(err), s.wantErr)
				return
			}
			require.NoError(t, err, out)
			rest := out
			for _, w := range s.want {
				i := strings.Index(rest, w)
				require.GreaterOrEqual(t, i, 0, "%q not in output (in order):\n%s", w, out)
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestServeDebugAddr(t *testing.T) {
	addr, out := serveInProcessOutput(t, "--debug-addr", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	_, err := runCmd(ctx, nil, "put", "k", "f=v", "--addr", addr)
	require.NoError(t, err)
	m := regexp.MustCompile(`debug: (http://\S+)/metrics`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m[1]+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	http.DefaultClient.CloseIdleConnections()
	assert.Contains(t, string(body), "hatkv_store_records 1")
	assert.Contains(t, string(body), `hatrpc_server_calls_total{function="Put",service="HatKV",transport="`+fastpathtest.Transport()+`"} 1`)
}

func TestServeRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	corrupt := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(corrupt, "data.mdb"), []byte(strings.Repeat("junk", 4096)), 0o644))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad transport", []string{"--transport", "udp"}, "want auto, tcp, shm or rdma"},
		{"data path is a file", []string{"--db", file}, "not a hatkv data directory"},
		{"corrupt data file", []string{"--db", corrupt}, "corrupt or not an LMDB file"},
		{"bad sync override", []string{"--sync", "sometimes"}, "kv.sync=sometimes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"serve", "--listen", "127.0.0.1:0", "--db", t.TempDir()}, tt.args...)
			_, err := runCmd(ctx, nil, args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestServeRDMAWithoutNICSHMOnly: on a host without an RDMA device (where
// the fast-path tests run on shm), serve refuses --transport rdma clearly.
// On an RDMA host there is nothing to refuse; the test says so and is
// counted as provider-specific by test/rxe/suite.sh.
func TestServeRDMAWithoutNICSHMOnly(t *testing.T) {
	if fastpathtest.Provider() != "shm" {
		t.Skip("provider-specific: this host has an RDMA device")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	_, err := runCmd(ctx, nil, "serve", "--listen", "127.0.0.1:0", "--db", t.TempDir(), "--transport", "rdma")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "transport not available: rdma: fastpath: rdma/shm transport unavailable: open ibv")
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&gen.InvalidArgument{Message: "empty key"}, "invalid argument: empty key"},
		{&gen.NotFound{Message: `key "k" not found`, Key: "k"}, `key "k" not found`},
		{&gen.StoreFull{Message: "map size reached"}, "store full: map size reached"},
		{&gen.StoreFull{Message: "store is full (map size 1048576 bytes); reads and deletes still work"},
			"store is full (map size 1048576 bytes); reads and deletes still work"},
		{&gen.StoreFull{Message: "store is full: disk full (0 bytes free on the file system holding d): input/output error; reads still work, writes and deletes once space is freed"},
			"store is full: disk full (0 bytes free on the file system holding d): input/output error; reads still work, writes and deletes once space is freed"},
		{hatkv.ErrTransportUnavailable, hatkv.ErrTransportUnavailable.Error()},
		{errors.New("plain"), "plain"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, describe(tt.err))
	}
}
