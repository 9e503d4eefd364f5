package rdma

import "fmt"

// Opcode is a send-queue operation (hr_opcode).
type Opcode uint32

// Send-queue opcodes.
const (
	OpSend              Opcode = 0
	OpSendWithImm       Opcode = 1
	OpRDMAWrite         Opcode = 2
	OpRDMAWriteWithImm  Opcode = 3
	OpRDMARead          Opcode = 4
	OpAtomicFetchAndAdd Opcode = 5
	OpAtomicCmpAndSwp   Opcode = 6
	NumOpcodes                 = 7
)

// Receive-side completion opcodes.
const (
	OpRecv            Opcode = 16
	OpRecvRDMAWithImm Opcode = 17
	opUnknown         Opcode = 0xff
)

var opNames = map[Opcode]string{
	OpSend: "SEND", OpSendWithImm: "SEND_WITH_IMM", OpRDMAWrite: "RDMA_WRITE",
	OpRDMAWriteWithImm: "RDMA_WRITE_WITH_IMM", OpRDMARead: "RDMA_READ",
	OpAtomicFetchAndAdd: "ATOMIC_FETCH_AND_ADD", OpAtomicCmpAndSwp: "ATOMIC_CMP_AND_SWP",
	OpRecv: "RECV", OpRecvRDMAWithImm: "RECV_RDMA_WITH_IMM",
}

func (o Opcode) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("Opcode(%d)", uint32(o))
}

// SendFlags are per work request flags.
type SendFlags uint32

// Send flags.
const (
	Signaled  SendFlags = 1
	Inline    SendFlags = 2
	Solicited SendFlags = 4
	Fence     SendFlags = 8
	// Stream hints that the target polls on another CPU: the shm provider
	// copies a large SEND or WRITE into it with non-temporal stores; ibv
	// ignores it.
	Stream SendFlags = 16
)

// Access is a memory region's permission set.
type Access uint32

// Access flags.
const (
	LocalWrite   Access = 1
	RemoteWrite  Access = 2
	RemoteRead   Access = 4
	RemoteAtomic Access = 8
	// AccessAll is what a buffer exposed for every one-sided operation needs.
	AccessAll = LocalWrite | RemoteWrite | RemoteRead | RemoteAtomic
)

// MaxSGE is the most scatter/gather entries one work request carries.
const MaxSGE = 4

// SGE is one scatter/gather entry; Addr must lie in registered memory.
// Layout matches hr_sge.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send-queue work request; its layout matches hr_send_wr so a
// chain ([]SendWR) crosses to C without copying.
type SendWR struct {
	WRID       uint64
	Opcode     Opcode
	Flags      SendFlags
	NumSGE     uint32
	Imm        uint32
	SG         [MaxSGE]SGE
	RemoteAddr uint64
	RKey       uint32
	_          uint32
	CompareAdd uint64
	Swap       uint64
}

// RecvWR is a receive work request (layout of hr_recv_wr).
type RecvWR struct {
	WRID   uint64
	NumSGE uint32
	_      uint32
	SG     [MaxSGE]SGE
}

// Completion is one work completion (layout of hr_wc).
type Completion struct {
	WRID      uint64
	Status    Status
	Opcode    Opcode
	ByteLen   uint32
	Imm       uint32
	QPNum     uint32
	Flags     uint32
	VendorErr uint32
	_         uint32
}

// HasImm reports whether the completion carries immediate data.
func (c *Completion) HasImm() bool { return c.Flags&1 != 0 }

// Err is nil on success, else the status as an error.
func (c *Completion) Err() error {
	if c.Status == StatusOK {
		return nil
	}
	return c.Status
}

// QPState is a queue pair state.
type QPState int

// Queue pair states.
const (
	QPReset QPState = 0
	QPInit  QPState = 1
	QPRTR   QPState = 2
	QPRTS   QPState = 3
	QPError QPState = 4
)

func (s QPState) String() string {
	switch s {
	case QPReset:
		return "RESET"
	case QPInit:
		return "INIT"
	case QPRTR:
		return "RTR"
	case QPRTS:
		return "RTS"
	case QPError:
		return "ERROR"
	}
	return fmt.Sprintf("QPState(%d)", int(s))
}

// Counters are per-QP or per-device operation counts. Inbound counts
// operations served as the target (ibv: only receives are visible to
// software; one-sided inbound operations are not counted).
type Counters struct {
	Posted      [NumOpcodes]uint64
	Inbound     [NumOpcodes]uint64
	RecvPosted  uint64
	BytesOut    uint64
	BytesIn     uint64
	Completions uint64
	Errors      uint64
}
