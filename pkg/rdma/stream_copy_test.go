package rdma

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Stream hint changes how shm copies a large SEND or WRITE (streaming
// stores for whole lines, cached copies for an unaligned head and a
// partial last line), never what arrives: every byte in place, none
// around it touched, for sizes at and around the window's ends, offsets
// that leave a head and a tail, and a message in two pieces.
func TestStreamFlagCopies(t *testing.T) {
	const kib = 1 << 10
	tests := []struct {
		op             Opcode
		size           int
		srcOff, dstOff int
		split          int // > 0: the source in two SGEs, the first this long
	}{
		{OpRDMAWrite, 64 * kib, 0, 0, 0},
		{OpRDMAWrite, 64*kib - 1, 0, 0, 0},
		{OpRDMAWrite, 64*kib + 1, 3, 61, 0},
		{OpRDMAWrite, 128 * kib, 5, 17, 0},
		{OpRDMAWrite, 128 * kib, 0, 64, 40*kib + 3},
		{OpRDMAWriteWithImm, 128*kib + 33, 64, 1, 0},
		{OpRDMAWrite, 256 * kib, 9, 63, 0},
		{OpRDMAWrite, 256*kib + 1, 0, 0, 0},
		{OpSend, 128 * kib, 7, 0, 0},
		{OpSendWithImm, 100*kib + 7, 1, 0, 3*kib + 1},
	}
	a, b := newPair(t, pairCfg{a: sideCfg{bufSize: 1 << 20}, b: sideCfg{bufSize: 1 << 20}})
	for i, tt := range tests {
		for _, flags := range []SendFlags{Signaled, Signaled | Stream} {
			t.Run(fmt.Sprintf("%v/%d/src+%d/dst+%d/split%d/stream=%v", tt.op, tt.size, tt.srcOff, tt.dstOff, tt.split, flags&Stream != 0), func(t *testing.T) {
				src, dst := a.mr.Bytes(), b.mr.Bytes()
				fill(src, byte(i))
				for j := range dst {
					dst[j] = 0xee
				}
				var sges []SGE
				if tt.split > 0 {
					sges = []SGE{a.mr.SGE(tt.srcOff, tt.split), a.mr.SGE(tt.srcOff+tt.split, tt.size-tt.split)}
				} else {
					sges = []SGE{a.mr.SGE(tt.srcOff, tt.size)}
				}
				wr := sendWR(uint64(i+1), tt.op, flags, sges...)
				wr.RemoteAddr, wr.RKey = a.peer.Buffers[0].Addr+uint64(tt.dstOff), a.peer.Buffers[0].RKey
				consumesRecv := tt.op != OpRDMAWrite
				if consumesRecv {
					require.NoError(t, b.qp.PostRecv([]RecvWR{recvWR(9, b.mr.SGE(tt.dstOff, b.mr.Len()-tt.dstOff))}))
				}
				require.NoError(t, a.qp.PostSend([]SendWR{wr}))
				require.NoError(t, waitN(t, a.scq, 1)[0].Err())
				if consumesRecv {
					rc := waitN(t, b.rcq, 1)[0]
					require.NoError(t, rc.Err())
					require.Equal(t, uint32(tt.size), rc.ByteLen)
				}
				require.Equal(t, src[tt.srcOff:tt.srcOff+tt.size], dst[tt.dstOff:tt.dstOff+tt.size])
				for j, c := range dst[:tt.dstOff] {
					require.Equal(t, byte(0xee), c, "byte %d before the message", j)
				}
				for j, c := range dst[tt.dstOff+tt.size:] {
					if c != 0xee {
						require.Failf(t, "written past the message", "byte %d after it is %#x", j, c)
					}
				}
			})
		}
	}
}
