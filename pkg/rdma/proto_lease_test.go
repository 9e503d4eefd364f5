package rdma

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Two leases, each larger than the staging buffer, between two exchanges
// while an unsignaled send is outstanding: the first keeps the old buffer
// until a completion retires that send, and the second must not wait for
// that completion, which no post is coming to bring (a server's handler
// hung there for good; a client's lease failed once its last call's
// context ended).
func TestStagingGrowsTwiceBetweenExchanges(t *testing.T) {
	cfg := testEPConfig(PollBusy)
	cli, srv := newRPCPair(t, cfg, cfg, false)
	twice := func(lease func(int) []byte) []byte {
		_ = lease(300 << 10)
		return lease(1 << 20)
	}
	serve(t, srv, ProtoEager, func(req []byte) []byte {
		if len(req) != 1 {
			return req
		}
		out := twice(srv.ReplyBuffer) // after an unsignaled reply (SignalInterval 8)
		fill(out, 5)
		return out
	})
	for _, side := range []string{"client", "server"} {
		_, err := callT(t, cli, ProtoEager, make([]byte, 10)) // one unsignaled SEND each way
		require.NoError(t, err, side)
		want := make([]byte, 1<<20)
		fill(want, 5)
		req := []byte{1}
		if side == "client" {
			req = twice(cli.RequestBuffer)
			require.Len(t, req, 1<<20)
			copy(req, want)
		}
		got, err := callT(t, cli, ProtoEager, req) // too large for a slot: Write-RNDV
		require.NoError(t, err, side)
		require.Equal(t, want, got, side)
	}
}
