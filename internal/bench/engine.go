package bench

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/internal/bench/gen/atb"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// Engine is the raw HatRPC protocol engine (rdma.RPCEndpoint) on the
// provider HATRPC_PROVIDER selects, serving the ATB echo: no Thrift
// framing, one endpoint pair per caller (an endpoint has one call in
// flight), the TCP connection used only to bootstrap and to notice that the
// caller went away.
type Engine struct {
	Proto rdma.Protocol
	// Planned picks protocol, polling and thresholds from the plan table
	// (hints.TableFor; see PlanEngine); Proto is then ignored.
	Planned bool
	// RFPFetch sets R = 2^20 so RFP stays in fetch mode: on shm a READ is a
	// memcpy, and the default R = 5 drops to server-reply almost at once.
	RFPFetch bool
}

// rfpFetchRetries is the R of the rfp-fetch system.
const rfpFetchRetries = 1 << 20

// EnginePrefix is the system-name prefix of the engine systems: "shm" or
// "verbs", after the provider HATRPC_PROVIDER selects. "auto" (the
// default) means verbs when the host has an RDMA device.
func EnginePrefix() string {
	switch os.Getenv(rdma.EnvProvider) {
	case rdma.ProviderIBV:
		return "verbs"
	case rdma.ProviderSHM:
		return "shm"
	}
	if ents, err := os.ReadDir("/sys/class/infiniband"); err == nil && len(ents) > 0 {
		return "verbs"
	}
	return "shm"
}

func providerOfPrefix(p string) string {
	if p == "verbs" {
		return rdma.ProviderIBV
	}
	return rdma.ProviderSHM
}

// Label is the protocol part of the system name.
func (e Engine) Label() string {
	switch {
	case e.Planned:
		return "planned"
	case e.RFPFetch:
		return "rfp-fetch"
	}
	return e.Proto.String()
}

// Name is "<shm|verbs>-<label>".
func (e Engine) Name() string { return EnginePrefix() + "-" + e.Label() }

// IsEngineSystem reports whether name is one of the engine systems.
func IsEngineSystem(name string) bool {
	_, ok := engineSystems[name]
	return ok
}

var engineSystems = map[string]Engine{}

// EngineSystems lists the engine systems in a fixed order: the fixed
// protocols as rdma.Protocols lists them, rfp-fetch, planned.
func EngineSystems() []string {
	var out []string
	for _, p := range rdma.Protocols() {
		out = append(out, Engine{Proto: p}.Name())
	}
	return append(out, Engine{Proto: rdma.ProtoRFP, RFPFetch: true}.Name(), Engine{Planned: true}.Name())
}

// TCPSystems lists the registered echo systems that are not engine
// systems, UCX's shared memory nor the host's floor (stream systems:
// StreamSystems).
func TCPSystems() []string {
	var out []string
	for _, s := range Systems() {
		if !IsEngineSystem(s) && !isUCX(s) && !IsStream(s) && !IsFloor(s) {
			out = append(out, s)
		}
	}
	return out
}

// PlanSet is what the planned system plans from: the client Set of the ATB
// service's echo function (gen/atb.EchoHints) with the transport set to
// rdma (the IDL says tcp for the TCP harness) and the goal, payload size
// and concurrency of the benchmark point.
func PlanSet(goal hints.Goal, size, callers int) hints.Set {
	s := atb.EchoHints.Function("echo").Client
	// The transport the lanes would run on: the planner adapts the design
	// space to shared memory (pkg/hints.shmSpace).
	s.Transport = hints.TransportRDMA
	if EnginePrefix() == "shm" {
		s.Transport = hints.TransportSHM
	}
	s.PerfGoal = goal
	s.PayloadSize = size
	s.Concurrency = callers
	return s
}

// PlanGoal is the goal a run with n callers plans for: latency for one
// caller (the latency runs), throughput for several. For one caller both
// goals plan the same protocol and polling (Fig. 6, under-subscribed);
// only the receive credits differ.
func PlanGoal(callers int) hints.Goal {
	if callers <= 1 {
		return hints.Latency
	}
	return hints.Throughput
}

// EngineSetup is what a caller and its server endpoint run with; the caller
// sends it to the server before the bootstrap so both sides agree.
type EngineSetup struct {
	Proto  rdma.Protocol       `json:"proto"`
	Config rdma.EndpointConfig `json:"config"`
}

// Setup resolves the protocol and endpoint configuration for size-byte
// echoes with callers concurrent callers on this machine.
func (e Engine) Setup(size, callers int) EngineSetup {
	// Every system polls the way the planner would at this concurrency:
	// busy for one caller, event once callers reach the cores (spinning
	// pollers outnumbering 2 cores collapse). Adaptive maps to event, which
	// is what the engine has.
	// A bare endpoint's server polls memory, unlike a lane's: the table
	// then plans tiny shm messages by RFP (hints.ShmTinyMessage).
	plan := hints.TableFor(PlanSet(PlanGoal(callers), size, callers),
		hints.Env{Side: hints.SideClient, Cores: runtime.NumCPU(), PeerPollsMemory: true})
	row := plan.LaneRowFor(size)
	cfg := rdma.EndpointConfig{Polling: rdma.PollEvent}
	if row.Polling == hints.PollBusy {
		cfg.Polling = rdma.PollBusy
	}
	proto := e.Proto
	switch {
	case e.Planned:
		proto = fastpath.EngineProtocol(row.Protocol)
		cfg.InlineThreshold = plan.InlineThreshold
		if cfg.InlineThreshold == 0 {
			cfg.InlineThreshold = -1
		}
		cfg.EagerThreshold = plan.EagerThreshold
		cfg.SignalInterval = plan.SignalInterval
		cfg.MaxSendWR = max(64, 2*plan.SignalInterval)
		cfg.RFPRetries = plan.RFPRetries
		cfg.RFPFetchSize = plan.RFPFetchSize
		cfg.Slots = plan.Credits
	case e.RFPFetch:
		cfg.RFPRetries = rfpFetchRetries
	}
	return EngineSetup{Proto: proto, Config: cfg}
}

// Describe reports the protocol and polling a system runs with at a point
// (for the tables; TCP systems are "tcp", "-"; the runtime on engine
// lanes is "lanes", "-": its protocols and polling are planned per call
// by atb.thrift's hints, see docs/design/lanes.md). A baseline system is
// described as this build's system of its name.
func Describe(system string, size, callers int) (proto, polling string) {
	system = BaseName(system)
	if system == lanesName {
		return "lanes", "-"
	}
	if sys, err := Lookup(system); err == nil {
		switch u := sys.(type) {
		case UCX:
			return u.Test, "busy" // ucx_perftest polls its worker
		case Floor:
			return "spin", "busy"
		}
	}
	e, ok := engineSystems[system]
	if !ok {
		return "tcp", "-"
	}
	s := e.Setup(size, callers)
	return s.Proto.String(), s.Config.Polling.String()
}

// maxSetup bounds the setup message a server accepts.
const maxSetup = 4 << 10

func writeSetup(conn net.Conn, s EngineSetup) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...))
	return err
}

func readSetup(conn net.Conn) (EngineSetup, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return EngineSetup{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxSetup {
		return EngineSetup{}, fmt.Errorf("bench: engine setup of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(conn, b); err != nil {
		return EngineSetup{}, err
	}
	var s EngineSetup
	return s, json.Unmarshal(b, &s)
}

// ErrProvider means the opened device is not the provider the system name
// promises.
var ErrProvider = errors.New("bench: provider differs from the system name")

// engineDevice is a device and PD shared by the endpoints of one server or
// one set of callers; the last release closes it.
type engineDevice struct {
	dev  *rdma.Device
	pd   *rdma.PD
	mu   sync.Mutex
	refs int
}

func openEngineDevice(refs int) (*engineDevice, error) {
	dev, err := rdma.Open()
	if err != nil {
		return nil, err
	}
	if want := providerOfPrefix(EnginePrefix()); dev.Provider() != want {
		_ = dev.Close()
		return nil, fmt.Errorf("%w: opened %s, named %s", ErrProvider, dev.Provider(), want)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	return &engineDevice{dev: dev, pd: pd, refs: refs}, nil
}

func (d *engineDevice) acquire() {
	d.mu.Lock()
	d.refs++
	d.mu.Unlock()
}

func (d *engineDevice) release() error {
	d.mu.Lock()
	d.refs--
	last := d.refs == 0
	d.mu.Unlock()
	if !last {
		return nil
	}
	return errors.Join(d.pd.Close(), d.dev.Close())
}

// bootstrapTimeout bounds one endpoint's setup and bootstrap.
const bootstrapTimeout = 10 * time.Second
