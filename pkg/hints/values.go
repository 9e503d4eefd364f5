package hints

import (
	"fmt"
	"strconv"
	"strings"
)

// Every enum below has its built-in default as the zero value, so that a
// Set's zero value means "all defaults" and GoLiteral can omit defaults.
// String returns the hint spelling; MarshalText/UnmarshalText use the same
// spelling so JSON and logs stay stable across releases.

// Goal is the `perf_goal` hint.
type Goal int

const (
	Latency    Goal = iota // latency (default)
	Throughput             // throughput
	ResUtil                // res_util: save CPU and registered memory
)

// Polling is the `polling` (alias `perf_pref`) hint: how completions are
// waited for.
type Polling int

const (
	PollAuto     Polling = iota // auto: the planner decides from the goal (default)
	PollBusy                    // busy: spin on the completion queue
	PollEvent                   // event: block on the completion channel
	PollAdaptive                // adaptive: spin for a bounded time, then block
)

// Protocol is the `protocol` (alias `proto`) hint: the RDMA message protocol
// (HatRPC §3.1, Fig. 3).
type Protocol int

const (
	ProtoAuto             Protocol = iota // auto: the planner decides (default)
	ProtoEager                            // eager: Eager-SendRecv
	ProtoWriteRNDV                        // write_rndv: RDMA WRITE rendezvous
	ProtoReadRNDV                         // read_rndv: RDMA READ rendezvous
	ProtoDirectWriteSend                  // direct_write_send: WRITE then SEND
	ProtoChainedWriteSend                 // chained_write_send: WRITE+SEND chained in one post
	ProtoDirectWriteIMM                   // direct_write_imm: WRITE_WITH_IMM
	ProtoRFP                              // rfp: remote fetching (RFP/RF-RPC)
	ProtoHybrid                           // hybrid: Hybrid-EagerRNDV, eager below eager_threshold
)

// Transport is the `transport` hint.
type Transport int

const (
	TransportAuto Transport = iota // auto: whatever both peers support, best first (default)
	TransportRDMA                  // rdma
	TransportSHM                   // shm: shared memory, same host only
	TransportTCP                   // tcp
)

// Switch is a tri-state auto/on/off hint (`qp_sharing`).
type Switch int

const (
	SwitchAuto Switch = iota // auto (default)
	SwitchOn                 // on
	SwitchOff                // off
)

// NUMA is the `numa` hint. The zero value is NUMANone; NUMANIC binds to the
// node the NIC hangs off; NUMANode(n) binds to node n. The node id is stored
// offset by one so that node 0 stays distinguishable from "none".
type NUMA int

const (
	NUMANIC  NUMA = -1 // nic
	NUMANone NUMA = 0  // none (default)
)

// NUMANode returns the NUMA value that binds to node n (n >= 0).
func NUMANode(n int) NUMA { return NUMA(n + 1) }

// Node reports the node id when the value binds to an explicit node.
func (n NUMA) Node() (int, bool) {
	if n > 0 {
		return int(n) - 1, true
	}
	return 0, false
}

// Batch is the `batch` hint: BatchOff, BatchAuto (RFP §4.2 auto tuning under
// latency_limit), or a fixed maximum number of requests per batch (N >= 1).
type Batch int

const (
	BatchAuto Batch = -1 // auto
	BatchOff  Batch = 0  // off (default)
)

var (
	goalNames      = []string{"latency", "throughput", "res_util"}
	pollingNames   = []string{"auto", "busy", "event", "adaptive"}
	protocolNames  = []string{"auto", "eager", "write_rndv", "read_rndv", "direct_write_send", "chained_write_send", "direct_write_imm", "rfp", "hybrid"}
	transportNames = []string{"auto", "rdma", "shm", "tcp"}
	switchNames    = []string{"auto", "on", "off"}
	onOffNames     = []string{"off", "on"}
)

// Extra accepted spellings. They are for people who write the protocol names
// the way the HatRPC paper prints them (Eager-SendRecv, Hybrid-EagerRNDV);
// output always uses the canonical spelling.
var (
	goalAliases     = map[string]string{"resource": "res_util", "res_utilization": "res_util"}
	pollingAliases  = map[string]string{"event_driven": "event", "spin": "busy"}
	protocolAliases = map[string]string{
		"eager_sendrecv":    "eager",
		"eager_send_recv":   "eager",
		"hybrid_eager_rndv": "hybrid",
		"direct_writeimm":   "direct_write_imm",
		"write_imm":         "direct_write_imm",
	}
	switchAliases = map[string]string{"true": "on", "false": "off", "yes": "on", "no": "off"}
)

func enumString(names []string, typ string, v int) string {
	if v >= 0 && v < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

func enumParse(names []string, aliases map[string]string, s string) (int, bool) {
	t := strings.ToLower(strings.TrimSpace(s))
	if a, ok := aliases[t]; ok {
		t = a
	}
	for i, n := range names {
		if n == t {
			return i, true
		}
	}
	return 0, false
}

func enumText(names []string, typ string, v int) ([]byte, error) {
	if v < 0 || v >= len(names) {
		return nil, fmt.Errorf("%w: %s(%d)", ErrBadValue, typ, v)
	}
	return []byte(names[v]), nil
}

func enumErr(typ, s string, names []string) error {
	return &ValueError{Value: s, Want: "one of " + strings.Join(names, ", "), Type: typ}
}

func (g Goal) String() string                  { return enumString(goalNames, "Goal", int(g)) }
func (g Goal) MarshalText() ([]byte, error)    { return enumText(goalNames, "Goal", int(g)) }
func (g *Goal) UnmarshalText(b []byte) error   { v, err := ParseGoal(string(b)); *g = v; return err }
func (p Polling) String() string               { return enumString(pollingNames, "Polling", int(p)) }
func (p Polling) MarshalText() ([]byte, error) { return enumText(pollingNames, "Polling", int(p)) }
func (p *Polling) UnmarshalText(b []byte) error {
	v, err := ParsePolling(string(b))
	*p = v
	return err
}
func (p Protocol) String() string               { return enumString(protocolNames, "Protocol", int(p)) }
func (p Protocol) MarshalText() ([]byte, error) { return enumText(protocolNames, "Protocol", int(p)) }
func (p *Protocol) UnmarshalText(b []byte) error {
	v, err := ParseProtocol(string(b))
	*p = v
	return err
}
func (t Transport) String() string { return enumString(transportNames, "Transport", int(t)) }
func (t Transport) MarshalText() ([]byte, error) {
	return enumText(transportNames, "Transport", int(t))
}
func (t *Transport) UnmarshalText(b []byte) error {
	v, err := ParseTransport(string(b))
	*t = v
	return err
}
func (s Switch) String() string                { return enumString(switchNames, "Switch", int(s)) }
func (s Switch) MarshalText() ([]byte, error)  { return enumText(switchNames, "Switch", int(s)) }
func (s *Switch) UnmarshalText(b []byte) error { v, err := ParseSwitch(string(b)); *s = v; return err }

// ParseGoal parses a perf_goal spelling.
func ParseGoal(s string) (Goal, error) {
	if v, ok := enumParse(goalNames, goalAliases, s); ok {
		return Goal(v), nil
	}
	return 0, enumErr("goal", s, goalNames)
}

// ParsePolling parses a polling / perf_pref spelling.
func ParsePolling(s string) (Polling, error) {
	if v, ok := enumParse(pollingNames, pollingAliases, s); ok {
		return Polling(v), nil
	}
	return 0, enumErr("polling", s, pollingNames)
}

// ParseProtocol parses a protocol / proto spelling. Dashes count as
// underscores because the paper writes the names with dashes (Write-RNDV).
func ParseProtocol(s string) (Protocol, error) {
	if v, ok := enumParse(protocolNames, protocolAliases, strings.ReplaceAll(s, "-", "_")); ok {
		return Protocol(v), nil
	}
	return 0, enumErr("protocol", s, protocolNames)
}

// ParseTransport parses a transport spelling.
func ParseTransport(s string) (Transport, error) {
	if v, ok := enumParse(transportNames, nil, s); ok {
		return Transport(v), nil
	}
	return 0, enumErr("transport", s, transportNames)
}

// ParseSwitch parses auto/on/off (also true/false, yes/no).
func ParseSwitch(s string) (Switch, error) {
	if v, ok := enumParse(switchNames, switchAliases, s); ok {
		return Switch(v), nil
	}
	return 0, enumErr("switch", s, switchNames)
}

func (n NUMA) String() string {
	switch {
	case n == NUMANone:
		return "none"
	case n == NUMANIC:
		return "nic"
	case n > 0:
		return strconv.Itoa(int(n) - 1)
	}
	return fmt.Sprintf("NUMA(%d)", int(n))
}

func (n NUMA) MarshalText() ([]byte, error) {
	if n < NUMANIC {
		return nil, fmt.Errorf("%w: NUMA(%d)", ErrBadValue, int(n))
	}
	return []byte(n.String()), nil
}

func (n *NUMA) UnmarshalText(b []byte) error { v, err := ParseNUMA(string(b)); *n = v; return err }

// maxNUMANode bounds node ids; Linux's MAX_NUMNODES tops out at 1024.
const maxNUMANode = 1023

// ParseNUMA parses `none`, `nic` or a node id.
func ParseNUMA(s string) (NUMA, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "none", "off":
		return NUMANone, nil
	case "nic":
		return NUMANIC, nil
	}
	n, err := strconv.Atoi(t)
	if err != nil || !isDigits(t) {
		return 0, &ValueError{Value: s, Type: "numa", Want: "a node id, nic or none"}
	}
	if n > maxNUMANode {
		return 0, &RangeError{Value: s, Msg: fmt.Sprintf("must be at most %d", maxNUMANode)}
	}
	return NUMANode(n), nil
}

func (b Batch) String() string {
	switch {
	case b == BatchOff:
		return "off"
	case b == BatchAuto:
		return "auto"
	case b > 0:
		return strconv.Itoa(int(b))
	}
	return fmt.Sprintf("Batch(%d)", int(b))
}

func (b Batch) MarshalText() ([]byte, error) {
	if b < BatchAuto {
		return nil, fmt.Errorf("%w: Batch(%d)", ErrBadValue, int(b))
	}
	return []byte(b.String()), nil
}

func (b *Batch) UnmarshalText(p []byte) error { v, err := ParseBatch(string(p)); *b = v; return err }

// maxBatch bounds a fixed batch size; RFP's batches are a few KiB, so
// anything larger is a typo rather than a plan.
const maxBatch = 1 << 16

// ParseBatch parses `off`, `auto` or a maximum number of requests per batch.
func ParseBatch(s string) (Batch, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "off", "none", "false", "no":
		return BatchOff, nil
	case "auto":
		return BatchAuto, nil
	}
	n, err := ParseCount(t)
	if err != nil {
		var re *RangeError
		if isRange(err, &re) {
			return 0, err
		}
		return 0, &ValueError{Value: s, Type: "batch", Want: "off, auto or a count"}
	}
	if n > maxBatch {
		return 0, &RangeError{Value: s, Msg: fmt.Sprintf("must be at most %d", maxBatch)}
	}
	return Batch(n), nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
