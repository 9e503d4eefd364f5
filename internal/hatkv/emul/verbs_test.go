package emul

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// ops is what one side posted, by opcode, between two counter snapshots.
type ops map[rdma.Opcode]uint64

func posted(before, after rdma.Counters) ops {
	out := ops{}
	for op := range rdma.Opcode(rdma.NumOpcodes) {
		if d := after.Posted[op] - before.Posted[op]; d > 0 {
			out[op] = d
		}
	}
	return out
}

type snapshot struct{ cRPC, cOne, sRPC, sOne rdma.Counters }

func snap(t *testing.T, e *env, c *Client) snapshot {
	t.Helper()
	var s snapshot
	var err error
	s.cRPC, s.cOne, err = c.Counters()
	require.NoError(t, err)
	cs := e.srv.Counters()
	require.Len(t, cs, 1)
	s.sRPC, s.sOne = cs[0].RPC, cs[0].OneSided
	return s
}

// TestVerbsPerOperation asserts, from the QP counters, exactly which verbs
// operations each side posts per GET (and per large PUT) in each emulation.
func TestVerbsPerOperation(t *testing.T) {
	const n = 20
	const (
		send  = rdma.OpSend
		write = rdma.OpRDMAWrite
		wimm  = rdma.OpRDMAWriteWithImm
		read  = rdma.OpRDMARead
	)
	type want struct{ cRPC, cOne, sRPC ops }
	cases := []struct {
		kind Kind
		poll rdma.Polling
		size int  // bytes per field, 10 fields
		put  bool // measure PUTs of the record instead of GETs
		want want
		// rfpReads: client READs are fetches (≥ 1 per call), not exact
		rfpReads bool
	}{
		// AR-gRPC: eager (one SEND each way) below 4 KiB...
		{kind: ARGRPC, poll: rdma.PollBusy, size: 100, want: want{cRPC: ops{send: n}, sRPC: ops{send: n}}},
		{kind: ARGRPC, poll: rdma.PollEvent, size: 100, want: want{cRPC: ops{send: n}, sRPC: ops{send: n}}},
		// ... Read-RNDV from 4 KiB: the sender SENDs an RTS, the receiver
		// READs the payload and SENDs a FIN. A 6 KiB response:
		{kind: ARGRPC, poll: rdma.PollBusy, size: 600, want: want{cRPC: ops{send: 2 * n, read: n}, sRPC: ops{send: n}}},
		// and a 6 KiB request (PUT), answered eagerly:
		{kind: ARGRPC, poll: rdma.PollBusy, size: 600, put: true, want: want{cRPC: ops{send: n}, sRPC: ops{send: 2 * n, read: n}}},
		// HERD: the request by one RDMA WRITE into the server's polled
		// buffer (WRITE_WITH_IMM to an event-driven server), the response
		// by one SEND; the client READs nothing.
		{kind: HERD, poll: rdma.PollBusy, size: 100, want: want{cRPC: ops{write: n}, sRPC: ops{send: n}}},
		{kind: HERD, poll: rdma.PollEvent, size: 100, want: want{cRPC: ops{wimm: n}, sRPC: ops{send: n}}},
		// A 6 KiB request is still one WRITE (the buffer holds 64 KiB).
		{kind: HERD, poll: rdma.PollBusy, size: 600, put: true, want: want{cRPC: ops{write: n}, sRPC: ops{send: n}}},
		// RFP: the request by RDMA WRITE (WRITE_WITH_IMM to an event-driven
		// server, which cannot watch memory); the client READs the
		// response; the server posts nothing.
		{kind: RFP, poll: rdma.PollBusy, size: 100, want: want{cRPC: ops{write: n, read: n}, sRPC: ops{}}, rfpReads: true},
		{kind: RFP, poll: rdma.PollEvent, size: 100, want: want{cRPC: ops{wimm: n, read: n}, sRPC: ops{}}, rfpReads: true},
		// Pilaf: three READs on the one-sided QP, nothing else anywhere.
		{kind: Pilaf, poll: rdma.PollBusy, size: 100, want: want{cRPC: ops{}, cOne: ops{read: 3 * n}, sRPC: ops{}}},
		{kind: Pilaf, poll: rdma.PollEvent, size: 600, want: want{cRPC: ops{}, cOne: ops{read: 3 * n}, sRPC: ops{}}},
	}
	for _, tc := range cases {
		what := "get"
		if tc.put {
			what = "put"
		}
		t.Run(fmt.Sprintf("%v/%v/%dB/%s", tc.kind, tc.poll, tc.size*10, what), func(t *testing.T) {
			e := newEnv(t)
			c := e.dial(t, tc.kind, WithPolling(tc.poll))
			ctx := testCtx(t, testTimeout)
			key := "user00000000000000000001"
			rec := record(key, 0, 10, tc.size)
			require.NoError(t, c.Insert(ctx, key, rec))
			_, err := c.Read(ctx, key, nil)
			require.NoError(t, err)
			before := snap(t, e, c)
			for range n {
				if tc.put {
					require.NoError(t, c.Update(ctx, key, rec))
					continue
				}
				got, err := c.Read(ctx, key, nil)
				require.NoError(t, err)
				require.Equal(t, rec, got)
			}
			after := snap(t, e, c)
			cRPC := posted(before.cRPC, after.cRPC)
			if tc.rfpReads {
				st := c.ep.Stats()
				require.GreaterOrEqual(t, cRPC[read], uint64(n), "at least one fetch per call")
				require.Zero(t, st.RFPToReply, "stayed in fetch mode")
				t.Logf("rfp: %d READs for %d calls (%d fetch retries in all)", cRPC[read], n, st.RFPRetries)
				cRPC[read] = n
			}
			if tc.kind == HERD && tc.poll == rdma.PollBusy {
				st := c.ep.Stats()
				require.True(t, st.RFPServerReply, "%+v", st)
				require.Zero(t, st.RFPToFetch, "%+v", st)
			}
			require.Equal(t, tc.want.cRPC, cRPC, "client RPC QP")
			require.Equal(t, tc.want.sRPC, posted(before.sRPC, after.sRPC), "server RPC QP")
			require.Equal(t, tc.want.cOne, nilIfEmpty(posted(before.cOne, after.cOne)), "client one-sided QP")
			require.Empty(t, posted(before.sOne, after.sOne), "server one-sided QP")
			if tc.kind == Pilaf {
				require.Zero(t, after.sRPC.Completions-before.sRPC.Completions, "server saw nothing")
			}
		})
	}
}

func nilIfEmpty(o ops) ops {
	if len(o) == 0 {
		return nil
	}
	return o
}
