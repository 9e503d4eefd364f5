package rdma

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/internal/transport"
)

func TestStatusMirror(t *testing.T) {
	goStatuses := []Status{StatusOK, StatusNoDevice, StatusNoMem, StatusInvalid, StatusNoResources,
		StatusRemoteAccess, StatusRNRRetry, StatusRetryExc, StatusFlushed, StatusClosed, StatusLocalProt,
		StatusLocalLen, StatusRemoteInval, StatusRemoteOp, StatusCQOverflow, StatusTimedOut, StatusBadState,
		StatusNotSupported, StatusIO, StatusBadPeer, StatusLocalOp, statusMax}
	cs := cStatuses()
	require.Len(t, cs, len(goStatuses))
	for i, s := range goStatuses {
		require.Equal(t, cs[i], int(s), "status %d", i)
		if s != statusMax && s != StatusOK {
			require.True(t, strings.HasPrefix(s.Error(), "rdma: "))
			require.NotContains(t, s.Error(), "unknown")
		}
	}
	err := statusErr("op", -8)
	require.ErrorIs(t, err, ErrFlushed)
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, "op", e.Op)
	require.NoError(t, statusErr("op", 0))
	require.Contains(t, Status(99).Error(), "99")
}

func TestLayoutMatchesC(t *testing.T) {
	var w SendWR
	var r RecvWR
	var c Completion
	want := map[string]uintptr{
		"send.sg": unsafe.Offsetof(w.SG), "send.remote_addr": unsafe.Offsetof(w.RemoteAddr),
		"send.rkey": unsafe.Offsetof(w.RKey), "send.compare_add": unsafe.Offsetof(w.CompareAdd),
		"send.swap": unsafe.Offsetof(w.Swap), "send.imm": unsafe.Offsetof(w.Imm),
		"recv.sg": unsafe.Offsetof(r.SG), "wc.byte_len": unsafe.Offsetof(c.ByteLen),
		"wc.qp_num": unsafe.Offsetof(c.QPNum), "wc.vendor_err": unsafe.Offsetof(c.VendorErr),
		"wc.opcode_send":  uintptr(OpAtomicCmpAndSwp),
		"wc.opcode_recv":  uintptr(OpRecv),
		"wc.opcode_rwimm": uintptr(OpRecvRDMAWithImm),
	}
	require.Equal(t, want, cOffsets())
	for op := Opcode(0); op < NumOpcodes; op++ {
		require.NotContains(t, op.String(), "Opcode(")
	}
}

// TestProviderRegistry: the C core registers the providers of the
// transport registry, in its order, and finds each by name.
func TestProviderRegistry(t *testing.T) {
	var want []string
	for _, p := range transport.Providers {
		want = append(want, p.Name)
	}
	require.Equal(t, want, cProviderNames())
	_, err := Open(WithProvider("verbs"))
	require.ErrorIs(t, err, ErrInvalid)
	require.EqualError(t, err, `open provider "verbs" (want ibv, shm, auto): rdma: invalid argument`)
}

// TestUnsetOpNotSupported: an op a provider leaves unset answers the
// not-supported status, which Go maps to ErrNotSupported.
func TestUnsetOpNotSupported(t *testing.T) {
	d := bareDevice()
	_, err := d.Info()
	require.ErrorIs(t, err, ErrNotSupported)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, StatusNotSupported, e.Status)
	_, err = d.Counters()
	require.ErrorIs(t, err, ErrNotSupported)
	_, err = d.AllocPD()
	require.ErrorIs(t, err, ErrNotSupported)
	require.NoError(t, d.Close(), "a provider without close closes nothing")
}
