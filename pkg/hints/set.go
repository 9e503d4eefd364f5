package hints

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hatrpc/hatrpc/pkg/stream"
)

// Set is the fully resolved hint set of one side of one function (or of the
// service level). Every field's zero value means "the built-in default of
// that key" (see Keys): enums have their default as zero, and numeric fields
// use 0 for "default", which TableFor turns into concrete numbers. That keeps
// generated tables short: GoLiteral renders only fields that differ from the
// default. Runtime code should read the concrete values from a Plan.
type Set struct {
	PerfGoal        Goal
	Concurrency     int // concurrent callers (client) or connections (server); 0 = 1
	PayloadSize     int // bytes; client: request size, server: response size; 0 = unknown
	Polling         Polling
	Protocol        Protocol
	Transport       Transport
	NUMA            NUMA
	RFPRetries      int // RFP R; 0 = DefaultRFPRetries
	RFPFetchSize    int // RFP F in bytes; 0 = DefaultRFPFetchSize
	Batch           Batch
	BatchBytes      int           // RFP batch size limit L; 0 = DefaultBatchBytes
	BatchTimeout    time.Duration // RFP batch timeout T; 0 = DefaultBatchTimeout
	BatchAlpha      float64       // RFP auto-batch tolerance α; 0 = DefaultBatchAlpha
	LatencyLimit    time.Duration // RFP auto-batch l_limit; 0 = DefaultLatencyLimit
	InlineThreshold int           // bytes; 0 = DefaultInlineThreshold, InlineDisabled = never inline
	EagerThreshold  int           // bytes; 0 = DefaultEagerThreshold
	SignalInterval  int           // signal every Nth send; 0 = DefaultSignalInterval
	QPSharing       Switch
	Credits         int           // receive slots per connection; 0 = goal dependent
	Timeout         time.Duration // per-call deadline; 0 = none (the context decides)
	BorrowArgs      bool          // server: the handler keeps no argument past its return
	BorrowCtx       bool          // server: the handler keeps no context of the call past its return
	BorrowMsgs      bool          // a stream's receiver keeps no binary value of a message past its next RecvMsg
	NeverBlocks     bool          // server: the handler is short and never blocks (FLOCK may run it on its dispatcher)
	Idempotent      bool          // client: the function may be sent again (pkg/cluster and client.Conn retries, hedges)
	Retries         int           // client: attempts after the first when Idempotent; 0 = DefaultRetries, NoRetries = none
	Hedge           time.Duration // client: a Conn's hedge delay when Idempotent; 0 = none
	StreamWindow    int           // bytes: a streaming function's per-stream receive window on this side; 0 = the connection's
	App             map[string]string
}

// NoRetries is the Set.Retries value `retries=0` resolves to; 0 itself
// means "default".
const NoRetries = -1

// RetryBudget returns how many times an idempotent call may be sent again
// after its first attempt: 0 for a function that is not idempotent.
func (s Set) RetryBudget() int {
	switch {
	case !s.Idempotent || s.Retries == NoRetries:
		return 0
	case s.Retries == 0:
		return DefaultRetries
	}
	return s.Retries
}

// InlineDisabled is the Set.InlineThreshold value `inline_threshold=0`
// resolves to; 0 itself means "default".
const InlineDisabled = -1

// Duration units re-exported so that generated literals such as
// `Timeout: 2 * hints.Millisecond` need no extra import of "time".
const (
	Nanosecond  = time.Nanosecond
	Microsecond = time.Microsecond
	Millisecond = time.Millisecond
	Second      = time.Second
)

// Function is one function's resolved client and server sets.
type Function struct {
	Name           string
	Client, Server Set
	// Stream: how the function streams (its IDL annotation); a stream
	// plans as TCP (Env.Stream).
	Stream stream.Mode
}

// Service is the table generated code bakes in. Client and Server hold the
// service-level resolution (what a function without own hints gets); the
// connection-wide settings (numa, qp_sharing, credits, signal_interval)
// are read from there.
type Service struct {
	Name           string
	Client, Server Set
	Functions      []Function
}

// Function returns the named function's hints, nil if unknown.
func (s *Service) Function(name string) *Function {
	if s == nil {
		return nil
	}
	for i := range s.Functions {
		if s.Functions[i].Name == name {
			return &s.Functions[i]
		}
	}
	return nil
}

// Equal reports whether two sets hold the same values (App compared by
// content, nil equal to empty). Set holds a map, so == is unavailable;
// GoLiteral is a canonical rendering of every field.
func (s Set) Equal(o Set) bool { return GoLiteral(s) == GoLiteral(o) }

// IsDefault reports whether every field has its default value.
func (s Set) IsDefault() bool { return s.Equal(Set{}) }

// GoLiteral renders s as a one-line Go composite literal qualified with the
// package name `hints.`, listing only non-default fields in declaration
// order (App keys sorted). The output is gofmt-stable.
func GoLiteral(s Set) string {
	var b strings.Builder
	b.WriteString("hints.Set{")
	n := 0
	field := func(name, val string) {
		if n > 0 {
			b.WriteString(", ")
		}
		n++
		b.WriteString(name)
		b.WriteString(": ")
		b.WriteString(val)
	}
	num := func(name string, v int) {
		if v != 0 {
			field(name, strconv.Itoa(v))
		}
	}
	dur := func(name string, d time.Duration) {
		if d != 0 {
			field(name, durationLiteral(d))
		}
	}
	if s.PerfGoal != Latency {
		field("PerfGoal", "hints."+goalConst(s.PerfGoal))
	}
	num("Concurrency", s.Concurrency)
	num("PayloadSize", s.PayloadSize)
	if s.Polling != PollAuto {
		field("Polling", "hints."+pollingConst(s.Polling))
	}
	if s.Protocol != ProtoAuto {
		field("Protocol", "hints."+protocolConst(s.Protocol))
	}
	if s.Transport != TransportAuto {
		field("Transport", "hints."+transportConst(s.Transport))
	}
	switch {
	case s.NUMA == NUMANone:
	case s.NUMA == NUMANIC:
		field("NUMA", "hints.NUMANIC")
	default:
		if node, ok := s.NUMA.Node(); ok {
			field("NUMA", "hints.NUMANode("+strconv.Itoa(node)+")")
		} else {
			field("NUMA", strconv.Itoa(int(s.NUMA)))
		}
	}
	num("RFPRetries", s.RFPRetries)
	num("RFPFetchSize", s.RFPFetchSize)
	switch s.Batch {
	case BatchOff:
	case BatchAuto:
		field("Batch", "hints.BatchAuto")
	default:
		field("Batch", strconv.Itoa(int(s.Batch)))
	}
	num("BatchBytes", s.BatchBytes)
	dur("BatchTimeout", s.BatchTimeout)
	if s.BatchAlpha != 0 {
		field("BatchAlpha", strconv.FormatFloat(s.BatchAlpha, 'g', -1, 64))
	}
	dur("LatencyLimit", s.LatencyLimit)
	if s.InlineThreshold == InlineDisabled {
		field("InlineThreshold", "hints.InlineDisabled")
	} else {
		num("InlineThreshold", s.InlineThreshold)
	}
	num("EagerThreshold", s.EagerThreshold)
	num("SignalInterval", s.SignalInterval)
	if s.QPSharing != SwitchAuto {
		field("QPSharing", "hints."+switchConst(s.QPSharing))
	}
	num("Credits", s.Credits)
	dur("Timeout", s.Timeout)
	if s.BorrowArgs {
		field("BorrowArgs", "true")
	}
	if s.BorrowCtx {
		field("BorrowCtx", "true")
	}
	if s.BorrowMsgs {
		field("BorrowMsgs", "true")
	}
	if s.NeverBlocks {
		field("NeverBlocks", "true")
	}
	if s.Idempotent {
		field("Idempotent", "true")
	}
	if s.Retries == NoRetries {
		field("Retries", "hints.NoRetries")
	} else {
		num("Retries", s.Retries)
	}
	dur("Hedge", s.Hedge)
	num("StreamWindow", s.StreamWindow)
	if len(s.App) > 0 {
		keys := make([]string, 0, len(s.App))
		for k := range s.App {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var m strings.Builder
		m.WriteString("map[string]string{")
		for i, k := range keys {
			if i > 0 {
				m.WriteString(", ")
			}
			m.WriteString(strconv.Quote(k))
			m.WriteString(": ")
			m.WriteString(strconv.Quote(s.App[k]))
		}
		m.WriteString("}")
		field("App", m.String())
	}
	b.WriteString("}")
	return b.String()
}

func durationLiteral(d time.Duration) string {
	units := []struct {
		name string
		d    time.Duration
	}{{"hints.Second", time.Second}, {"hints.Millisecond", time.Millisecond}, {"hints.Microsecond", time.Microsecond}}
	for _, u := range units {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + " * " + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + " * hints.Nanosecond"
}

// The constant names GoLiteral emits; indexes follow the enum values.
var (
	goalConsts      = []string{"Latency", "Throughput", "ResUtil"}
	pollingConsts   = []string{"PollAuto", "PollBusy", "PollEvent", "PollAdaptive"}
	protocolConsts  = []string{"ProtoAuto", "ProtoEager", "ProtoWriteRNDV", "ProtoReadRNDV", "ProtoDirectWriteSend", "ProtoChainedWriteSend", "ProtoDirectWriteIMM", "ProtoRFP", "ProtoHybrid"}
	transportConsts = []string{"TransportAuto", "TransportRDMA", "TransportSHM", "TransportTCP"}
	switchConsts    = []string{"SwitchAuto", "SwitchOn", "SwitchOff"}
)

func constName(names []string, typ string, v int) string {
	if v >= 0 && v < len(names) {
		return names[v]
	}
	// An out-of-range value still renders as valid Go.
	return typ + "(" + strconv.Itoa(v) + ")"
}

func goalConst(g Goal) string           { return constName(goalConsts, "Goal", int(g)) }
func pollingConst(p Polling) string     { return constName(pollingConsts, "Polling", int(p)) }
func protocolConst(p Protocol) string   { return constName(protocolConsts, "Protocol", int(p)) }
func transportConst(t Transport) string { return constName(transportConsts, "Transport", int(t)) }
func switchConst(s Switch) string       { return constName(switchConsts, "Switch", int(s)) }
