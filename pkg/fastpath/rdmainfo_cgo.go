//go:build cgo && linux

package fastpath

import "github.com/hatrpc/hatrpc/pkg/rdma"

// ForkStatus is rdma.ForkStatus: how registered memory survives a fork.
func ForkStatus() string { return rdma.ForkStatus() }

// PortLimitsOf opens device's port on ibv and reports its limits; the
// inline size is probed with a QP, as verbs grant it per QP.
func PortLimitsOf(device string, port int) (PortLimits, error) {
	d, err := rdma.Open(rdma.WithProvider(rdma.ProviderIBV), rdma.WithDeviceName(device), rdma.WithPort(port))
	if err != nil {
		return PortLimits{}, err
	}
	defer d.Close()
	i, err := d.Info()
	if err != nil {
		return PortLimits{}, err
	}
	l := PortLimits{MTU: i.MTU, MaxQPWR: i.MaxQPWR, MaxSGE: i.MaxSGE, MaxCQE: i.MaxCQE,
		MaxMR: i.MaxMR, MaxQP: i.MaxQP, MaxMRSize: i.MaxMRSize}
	l.MaxInline, err = probeInline(d)
	return l, err
}

func probeInline(d *rdma.Device) (int, error) {
	pd, err := d.AllocPD()
	if err != nil {
		return 0, err
	}
	defer pd.Close()
	cq, err := d.CreateCQ(16)
	if err != nil {
		return 0, err
	}
	defer cq.Close()
	for _, want := range []int{1024, 512, 256, 128, 64} {
		qp, err := pd.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4, MaxSGE: 1, MaxInline: want})
		if err != nil {
			continue
		}
		caps, err := qp.Caps()
		_ = qp.Close()
		if err != nil {
			return 0, err
		}
		return caps.MaxInline, nil
	}
	return 0, nil
}
