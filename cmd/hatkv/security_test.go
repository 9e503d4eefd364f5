package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/internal/hatkv/testcert"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// TestBenchOverTLSWithToken is issue 18's "TLS between hatkv bench and
// serve; the token refused when wrong".
func TestBenchOverTLSWithToken(t *testing.T) {
	certs := testcert.Write(t, t.TempDir(), "hatkv")
	addr, out := serveInProcessOutput(t, "--tls-cert", certs.Cert, "--tls-key", certs.Key, "--token", "s3cret")
	assert.Contains(t, out.String(), ", TLS + token, listening on ")
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(90*time.Second))
	defer cancel()
	secure := []string{"--addr", addr, "--tls-ca", certs.CA, "--token", "s3cret"}

	res, err := runCmd(ctx, nil, append([]string{"bench", "-P", "workloadb_hatkv", "-p", "recordcount=50",
		"--threads", "2", "--operations", "200", "--seed", "3"}, secure...)...)
	require.NoError(t, err, res)
	assert.Regexp(t, `(?m)^\s*READ\s+\d+\s+0\s`, res)
	assert.NotContains(t, res, "operations failed")
	assert.Contains(t, res, "transport tcp", "TLS keeps every call on TCP")
	res, err = runCmd(ctx, nil, append([]string{"put", "user1", "field0=x"}, secure...)...)
	require.NoError(t, err, res)

	tests := []struct {
		name string
		args []string
		env  string // $HATKV_TOKEN
		want string
		is   error
	}{
		{name: "token from the environment", args: []string{"get", "user1", "--addr", addr, "--tls-ca", certs.CA}, env: "s3cret"},
		{name: "wrong token", args: []string{"get", "user1", "--addr", addr, "--tls-ca", certs.CA, "--token", "guess"},
			is: hatkv.ErrTokenRefused, want: "hatkv: the server refused the token (check --token / HATKV_TOKEN)"},
		{name: "wrong token in bench", args: []string{"bench", "-P", "workloadc", "--phase", "run", "--operations", "5",
			"--addr", addr, "--tls-ca", certs.CA, "--token", "guess"}, is: hatkv.ErrTokenRefused},
		{name: "no token", args: []string{"get", "user1", "--addr", addr, "--tls-ca", certs.CA},
			want: "(if the server requires a token, give --token or $HATKV_TOKEN)"},
		{name: "no TLS", args: []string{"get", "user1", "--addr", addr, "--token", "s3cret"}, want: "waiting for the server to accept the token (does it use TLS, and is it hatkv?)"},
		{name: "TLS with the system roots", args: []string{"get", "user1", "--addr", addr, "--tls", "--token", "s3cret"},
			want: "certificate signed by unknown authority"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(hatkv.TokenEnv, tc.env)
			res, err := runCmd(ctx, nil, tc.args...)
			if tc.want == "" && tc.is == nil {
				require.NoError(t, err, res)
				assert.Contains(t, res, "field0=")
				return
			}
			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			assert.Contains(t, describe(err), tc.want)
		})
	}
}

// TLS and the token over a unix socket: the certificate is checked for
// "localhost", the server being on this host.
func TestTLSWithTokenOverUnixSocket(t *testing.T) {
	certs := testcert.Write(t, t.TempDir(), "hatkv")
	sock := "unix:" + filepath.Join(t.TempDir(), "hatkv.sock")
	addr, out := serveInProcessOutput(t, "--listen", sock, "--tls-cert", certs.Cert, "--tls-key", certs.Key, "--token", "s3cret")
	require.Equal(t, sock, addr)
	assert.NotContains(t, out.String(), "listening beyond loopback", "a unix socket is not exposed")
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(90*time.Second))
	defer cancel()
	secure := []string{"--addr", addr, "--tls-ca", certs.CA, "--token", "s3cret"}
	res, err := runCmd(ctx, nil, append([]string{"put", "user1", "field0=u"}, secure...)...)
	require.NoError(t, err, res)
	res, err = runCmd(ctx, nil, append([]string{"get", "user1"}, secure...)...)
	require.NoError(t, err, res)
	assert.Contains(t, res, "field0=u")
}

func TestServeSecurityFlags(t *testing.T) {
	certs := testcert.Write(t, t.TempDir(), "hatkv")
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--tls-cert", certs.Cert}, "TLS needs both --tls-cert and --tls-key"},
		{"rdma lanes are not encrypted", []string{"--tls-cert", certs.Cert, "--tls-key", certs.Key, "--transport", "rdma"}, "RDMA lanes are not encrypted"},
		{"emulations have no TLS", []string{"--token", "x", "--emul-listen", "127.0.0.1:0"}, "--emul-listen serves the emulations' own protocols"},
		{"bad verify level", []string{"--verify", "some"}, `unknown verify level "some"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCmd(ctx, nil, append([]string{"serve", "--db", t.TempDir(), "--listen", "127.0.0.1:0"}, tc.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestVersionCompletionAndMissingField(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	out, err := runCmd(ctx, nil, "--version")
	require.NoError(t, err)
	assert.Regexp(t, `^hatkv \S+.* \(go1\.\d+.*, LMDB 0\.9\.\d+`, out)
	out, err = runCmd(ctx, nil, "completion", "bash")
	require.NoError(t, err)
	assert.Contains(t, out, "bash completion V2 for hatkv")

	addr := serveInProcess(t)
	_, err = runCmd(ctx, nil, "put", "user1", "a=1", "b=2", "--addr", addr)
	require.NoError(t, err)
	out, err = runCmd(ctx, nil, "get", "user1", "a", "nosuchfield", "other", "--addr", addr)
	require.ErrorIs(t, err, errMissingField)
	assert.Equal(t, `missing field: record "user1" has no field nosuchfield, other`, err.Error())
	assert.Equal(t, "a=1\n", out, "the fields found are still printed")
	// Through run, as the shell sees it: exit status 1.
	var stderr strings.Builder
	assert.Equal(t, 1, run([]string{"get", "user1", "nosuchfield", "--addr", addr}, &strings.Builder{}, &stderr))
	assert.Equal(t, "hatkv: missing field: record \"user1\" has no field nosuchfield\n", stderr.String())
}

// TestCheckAndBackupCommands: a backup taken from a serving process (a
// child: LMDB allows one environment handle per process) is verified and
// servable; check reports damage, serve refuses it, neither crashes.
func TestCheckAndBackupCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(120*time.Second))
	defer cancel()
	db := t.TempDir()
	p := startServeProcess(t, db)
	res, err := runCmd(ctx, nil, "bench", "--addr", p.addr, "-P", "workloadc", "-p", "recordcount=3000", "--phase", "load", "--threads", "4")
	require.NoError(t, err, res)

	backup := filepath.Join(t.TempDir(), "copy")
	res, err = runCmd(ctx, nil, "backup", "--db", db, backup)
	require.NoError(t, err, res)
	assert.Contains(t, res, "backup of "+db+" written to "+backup+": 3000 records, ")
	assert.Contains(t, res, "verified")
	res, err = runCmd(ctx, nil, "backup", "--db", db, backup)
	require.Error(t, err, "an existing backup is never overwritten")
	assert.Contains(t, err.Error(), "backup target must be a missing or empty directory")

	res, err = runCmd(ctx, nil, "check", "--db", backup)
	require.NoError(t, err, res)
	assert.Regexp(t, `hatkv\.data\s+3000\s+`, res)
	assert.Contains(t, res, "ok: no damage found")

	// Damage the copy: garbage at page 50.
	f, err := os.OpenFile(filepath.Join(backup, "data.mdb"), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte(strings.Repeat("garbage!", 3*os.Getpagesize()/8)), int64(50*os.Getpagesize()))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	res, err = runCmd(ctx, nil, "check", "--db", backup)
	require.ErrorIs(t, err, errDamaged)
	assert.Contains(t, res, "problem: tree hatkv.data: page 5")
	assert.Contains(t, res, "page header says page 2406443243860549991 (garbage or misplaced page)", `"garbage!" read as a page number`)
	_, err = runCmd(ctx, nil, "serve", "--db", backup, "--listen", "127.0.0.1:0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "problem(s) in data.mdb, e.g. tree hatkv.data: page 5")
	require.ErrorIs(t, err, kvstore.ErrCorruptData)
}
