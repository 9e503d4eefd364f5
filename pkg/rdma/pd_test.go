package rdma

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A protection domain scopes keys as on a NIC: an rkey or lkey of an MR in
// another PD than the QP's fails like a bad key, even on the same device
// and even though the memory is registered with every access right. This is
// what keeps one connection's memory out of reach of another connection's
// QP (the server gives each its own PD).
func TestPDScopesKeys(t *testing.T) {
	for _, two := range []bool{false, true} {
		name := "one-device"
		if two {
			name = "two-devices"
		}
		t.Run(name+"/remote", func(t *testing.T) {
			for _, op := range []Opcode{OpRDMAWrite, OpRDMARead, OpAtomicFetchAndAdd, OpRDMAWriteWithImm} {
				t.Run(op.String(), func(t *testing.T) {
					a, b := newPair(t, pairCfg{twoDevices: two})
					// Another PD on the target device, with memory every
					// right is granted on: only the PD is wrong.
					other, err := newPD(t, b.dev).AllocMR(4096, AccessAll)
					require.NoError(t, err)
					t.Cleanup(func() { require.NoError(t, other.Close()) })
					if op == OpRDMAWriteWithImm {
						// Without a receive the responder may answer RNR
						// before it looks at the rkey (rxe does).
						require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(60, b.mr.SGE(0, 64))}))
					}
					n := 64
					if op == OpAtomicFetchAndAdd {
						n = 8
					}
					r := other.Remote()
					w := sendWR(1, op, Signaled, a.mr.SGE(0, n))
					w.RemoteAddr, w.RKey = r.Addr, r.RKey
					require.NoError(t, a.qp.PostSend([]SendWR{w}))
					require.ErrorIs(t, waitN(t, a.scq, 1)[0].Err(), ErrRemoteAccess)
					require.Equal(t, QPError, a.qp.State())
					// The same work with the peer's own key goes through
					// on a fresh pair: the PD is what was refused.
					a2, _ := newPair(t, pairCfg{twoDevices: two})
					own := a2.peer.Buffers[0]
					w.RemoteAddr, w.RKey = own.Addr, own.RKey
					w.SG[0] = a2.mr.SGE(0, n)
					if op == OpRDMAWriteWithImm {
						w.Opcode = OpRDMAWrite
					}
					require.NoError(t, a2.qp.PostSend([]SendWR{w}))
					require.NoError(t, waitN(t, a2.scq, 1)[0].Err())
				})
			}
		})
		t.Run(name+"/receive", func(t *testing.T) {
			a, b := newPair(t, pairCfg{twoDevices: two})
			other, err := newPD(t, b.dev).AllocMR(4096, AccessAll)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, other.Close()) })
			require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(7, other.SGE(0, 64))}))
			require.NoError(t, a.qp.PostSend([]SendWR{sendWR(1, OpSend, Signaled, a.mr.SGE(0, 64))}))
			// The responder cannot use the receive's lkey; it NAKs with a
			// remote operation error (IB spec; rxe and shm alike).
			require.ErrorIs(t, waitN(t, a.scq, 1)[0].Err(), ErrRemoteOp)
			// On the receiving side: local protection per the spec; rxe
			// reports a local QP operation error for a key it cannot use.
			requireErrorIsOneOf(t, waitN(t, b.rcq, 1)[0].Err(), ErrLocalProt, ErrLocalOp)
			require.Equal(t, QPError, b.qp.State())
		})
		t.Run(name+"/local", func(t *testing.T) {
			a, _ := newPair(t, pairCfg{twoDevices: two})
			other, err := newPD(t, a.dev).AllocMR(4096, AccessAll)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, other.Close()) })
			require.NoError(t, a.qp.PostSend([]SendWR{sendWR(1, OpSend, Signaled, other.SGE(0, 64))}))
			// As TestLocalProtection: the spec says local protection, rxe a
			// local QP operation error.
			requireErrorIsOneOf(t, waitN(t, a.scq, 1)[0].Err(), ErrLocalProt, ErrLocalOp)
			require.Equal(t, QPError, a.qp.State())
		})
	}
}
