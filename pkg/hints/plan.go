package hints

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Subscription is the concurrency level relative to the cores (HatRPC Fig. 6,
// y-axis).
type Subscription int

const (
	Under Subscription = iota // concurrency < cores
	Full                      // concurrency == cores
	Over                      // concurrency > cores
)

var subscriptionNames = []string{"under", "full", "over"}

func (s Subscription) String() string { return enumString(subscriptionNames, "Subscription", int(s)) }

func (s Subscription) MarshalText() ([]byte, error) {
	return enumText(subscriptionNames, "Subscription", int(s))
}

func (s *Subscription) UnmarshalText(b []byte) error {
	v, ok := enumParse(subscriptionNames, nil, string(b))
	if !ok {
		return enumErr("subscription", string(b), subscriptionNames)
	}
	*s = Subscription(v)
	return nil
}

// SubscriptionOf classifies concurrency against cores (values below 1 count
// as 1).
func SubscriptionOf(concurrency, cores int) Subscription {
	concurrency, cores = max(concurrency, 1), max(cores, 1)
	switch {
	case concurrency < cores:
		return Under
	case concurrency == cores:
		return Full
	}
	return Over
}

// Plan is the concrete execution plan for one side of one function and one
// message size: every value is resolved (no "auto" except Transport, which
// the runtime settles by what the peer supports).
type Plan struct {
	Goal         Goal         `json:"goal"`
	Subscription Subscription `json:"subscription"`
	Concurrency  int          `json:"concurrency"`
	Cores        int          `json:"cores"`
	MsgSize      int          `json:"msg_size"` // 0 = unknown, planned as small
	Large        bool         `json:"large"`    // MsgSize > EagerThreshold

	Transport Transport `json:"transport"`
	Protocol  Protocol  `json:"protocol"` // never auto or hybrid
	Polling   Polling   `json:"polling"`  // never auto

	Inline          bool `json:"inline"`           // post this message inline
	InlineThreshold int  `json:"inline_threshold"` // 0 = inlining disabled
	EagerThreshold  int  `json:"eager_threshold"`
	SignalInterval  int  `json:"signal_interval"`

	RFPRetries   int `json:"rfp_retries"`
	RFPFetchSize int `json:"rfp_fetch_size"`

	Batching

	NUMA      NUMA          `json:"numa"`
	QPSharing bool          `json:"qp_sharing"`
	Credits   int           `json:"credits"`
	Timeout   time.Duration `json:"timeout"` // 0 = none
}

// Batching is RF-RPC's batching of one function's calls (RF-RPC §4): a
// batch of Batch calls (auto: sized by latency against LatencyLimit with
// smoothing BatchAlpha), at most BatchBytes, sent after BatchTimeout.
type Batching struct {
	Batch        Batch         `json:"batch"`
	BatchBytes   int           `json:"batch_bytes"`
	BatchTimeout time.Duration `json:"batch_timeout"`
	BatchAlpha   float64       `json:"batch_alpha"`
	LatencyLimit time.Duration `json:"latency_limit"`
}

// cell is one cell of the design space: what a goal picks at one
// subscription level for small and large messages.
type cell struct {
	small, large Protocol
	polling      Polling
}

// designSpace is HatRPC Fig. 6 (§3.3), indexed [goal][subscription]:
//
//   - latency: busy polling and Direct-WriteIMM for every size (§3.2: busy
//     polling gives the best latency; §5.2: "HatRPC can automatically select
//     busy polling ... and Direct-WriteIMM"). Over-subscribed, spinning
//     threads outnumber the cores and busy polling collapses (§3.2, Fig. 5),
//     so the planner switches to adaptive polling (spin, then block).
//   - throughput: Direct-WriteIMM for small messages at every level; for
//     large ones Direct-WriteIMM while the cores suffice and RFP once
//     over-subscribed (§3.3: "over-subscription and throughput ... event
//     polling ... RFP for large messages, Direct-WriteIMM for small"). Busy
//     polling costs nothing when cores are idle (under), event polling
//     from full subscription on, where a spinning poller steals a core
//     from the handlers.
//   - res_util: event polling everywhere (CPU is the resource); under-
//     subscribed Direct-WriteIMM small / Write-RNDV large, full and over
//     Eager-SendRecv small / Write-RNDV large (§3.3). Of "Write/Read-RNDV"
//     the planner picks Write-RNDV: it is the one the original engine
//     implements (§4.3) and it needs one control message less than
//     Read-RNDV for a response; read_rndv stays available as a hint.
var designSpace = [3][3]cell{
	Latency: {
		Under: {ProtoDirectWriteIMM, ProtoDirectWriteIMM, PollBusy},
		Full:  {ProtoDirectWriteIMM, ProtoDirectWriteIMM, PollBusy},
		Over:  {ProtoDirectWriteIMM, ProtoDirectWriteIMM, PollAdaptive},
	},
	Throughput: {
		Under: {ProtoDirectWriteIMM, ProtoDirectWriteIMM, PollBusy},
		Full:  {ProtoDirectWriteIMM, ProtoDirectWriteIMM, PollEvent},
		Over:  {ProtoDirectWriteIMM, ProtoRFP, PollEvent},
	},
	ResUtil: {
		Under: {ProtoDirectWriteIMM, ProtoWriteRNDV, PollEvent},
		Full:  {ProtoEager, ProtoWriteRNDV, PollEvent},
		Over:  {ProtoEager, ProtoWriteRNDV, PollEvent},
	},
}

// ShmTinyMessage is the largest message the shared-memory design space
// sends by RFP when under-subscribed, to a peer that polls memory (a bare
// endpoint, Env.PeerPollsMemory; a lane's server is event-capable and gets
// Direct-WriteIMM, see planAt). One fetch of the default 256 B
// (rfp_fetch_size) holds the engine's 72 B of header and tail and 184 B
// of response; a larger one takes a second READ, and Direct-WriteIMM wins
// (2026-11-29, atb, 1 caller, best of 9 repetitions taking turns, two
// runs: p50 at 192 B 1.54/1.77 against 1.08/1.02 µs, at 256 B 1.38/1.41
// against 1.29/1.09; calls/s at 192 B 539k/542k against 702k/593k, at 512
// B 536k-570k against 684k-763k in three runs). At 128-160 B the two were
// even (1.38/1.14 against 1.28/1.24 µs; 693k/606k against 661k/632k), at
// 4-64 B RFP as fast or faster in the sweeps (0.97 against 1.09 µs at 64 B).
// A smaller rfp_fetch_size lowers the limit: see ShmTinyLimit.
const ShmTinyMessage = 128

// RFPFetchOverhead is the part of an RFP fetch that is not response: the
// engine's message header and tail (pkg/rdma's MinFetchSize, which a test
// there holds equal to this; hints cannot import the cgo package).
const RFPFetchOverhead = 72

// ShmTinyLimit is the largest message the shared-memory planner sends by
// RFP with fetch size fetch (0: the default): the smaller of
// ShmTinyMessage and what one fetch holds, since a response that needs a
// second READ loses to Direct-WriteIMM. Below the engine's minimum fetch
// it is 0: nothing goes by RFP on its own account.
func ShmTinyLimit(fetch int) int {
	return max(min(ShmTinyMessage, or(fetch, DefaultRFPFetchSize)-RFPFetchOverhead), 0)
}

// shmSpace adapts a Fig. 6 cell to shared memory, where an RDMA READ is a
// local memcpy rather than a network round trip: over-subscribed large
// throughput transfers go by Read-RNDV (one control message less than
// Write-RNDV, and no fetching clients competing for the cores; measured
// best at 16-64 callers), instead of RFP.
func shmSpace(goal Goal, sub Subscription, c cell) cell {
	if goal == Throughput && sub == Over {
		c.large = ProtoReadRNDV
	}
	return c
}

// defaultCredits per goal: res_util keeps few pre-posted receive slots,
// throughput keeps enough to cover a pipeline of outstanding calls.
var defaultCredits = [3]int{Latency: 32, Throughput: 64, ResUtil: 16}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// planCaps is what planAt needs of the environment beyond the hints.
type planCaps struct {
	localRead bool // the provider's READ is a memcpy (Provider.LocalRead)
	tinyRFP   bool // the peer polls memory: tiny shm messages by RFP
}

// planAt maps a resolved set onto a concrete plan for messages of msgSize
// bytes on a machine with cores cores: one cell of a Table (TableFor calls
// it at each row). msgSize <= 0 uses the payload_size hint, and an unknown
// size is planned as small. Explicit protocol and polling hints override
// the design space; hybrid becomes eager or write_rndv by size.
func planAt(s Set, cores, msgSize int, pc planCaps) Plan {
	p := Plan{
		Goal:           s.PerfGoal,
		Concurrency:    max(s.Concurrency, 1),
		Cores:          max(cores, 1),
		MsgSize:        max(msgSize, 0),
		Transport:      s.Transport,
		EagerThreshold: or(s.EagerThreshold, DefaultEagerThreshold),
		SignalInterval: or(s.SignalInterval, DefaultSignalInterval),
		RFPRetries:     or(s.RFPRetries, DefaultRFPRetries),
		RFPFetchSize:   or(s.RFPFetchSize, DefaultRFPFetchSize),
		Batching: Batching{Batch: s.Batch, BatchBytes: or(s.BatchBytes, DefaultBatchBytes),
			BatchTimeout: or(s.BatchTimeout, DefaultBatchTimeout), BatchAlpha: or(s.BatchAlpha, DefaultBatchAlpha),
			LatencyLimit: or(s.LatencyLimit, DefaultLatencyLimit)},
		NUMA:    s.NUMA,
		Timeout: s.Timeout,
	}
	if p.MsgSize == 0 {
		p.MsgSize = max(s.PayloadSize, 0)
	}
	p.Subscription = SubscriptionOf(p.Concurrency, p.Cores)
	p.Large = p.MsgSize > p.EagerThreshold

	goal := s.PerfGoal
	if goal < Latency || goal > ResUtil {
		goal = Latency
	}
	c := designSpace[goal][p.Subscription]
	if pc.localRead {
		c = shmSpace(goal, p.Subscription, c)
	}
	p.Protocol = c.small
	if p.Large {
		p.Protocol = c.large
	} else if pc.localRead && pc.tinyRFP && goal != ResUtil && p.Subscription == Under && p.MsgSize > 0 && p.MsgSize <= ShmTinyLimit(p.RFPFetchSize) {
		// Under-subscribed tiny messages on shared memory to a peer that
		// polls memory: a fetch READ is a memcpy, so RFP is as fast as
		// Direct-WriteIMM or faster while one fetch holds the response (not
		// for res_util: a fetching client spins); see ShmTinyLimit. A
		// lane's server is event-capable: the request must carry an
		// immediate anyway, so RFP costs what Direct-WriteIMM costs plus
		// the payload canary and the fetch loop's READs racing the
		// server's writes. Measured on lanes (atb, 64 B, 10 alternating
		// rounds): Direct-WriteIMM 2.02-2.06 against RFP 2.09-2.13 µs p50,
		// 256 B 2.06-2.10 against 2.29-2.33; 512 B calls/s the same. So
		// lanes send tiny messages by Direct-WriteIMM.
		p.Protocol = ProtoRFP
	}
	switch s.Protocol {
	case ProtoAuto:
	case ProtoHybrid:
		p.Protocol = ProtoEager
		if p.Large {
			p.Protocol = ProtoWriteRNDV
		}
	default:
		p.Protocol = s.Protocol
	}
	p.Polling = or(s.Polling, c.polling)

	switch s.InlineThreshold {
	case InlineDisabled:
	case 0:
		p.InlineThreshold = DefaultInlineThreshold
	default:
		p.InlineThreshold = s.InlineThreshold
	}
	p.Inline = p.MsgSize > 0 && p.MsgSize <= p.InlineThreshold

	switch s.QPSharing {
	case SwitchOn:
		p.QPSharing = true
	case SwitchOff:
	default:
		// Sharing trades a little latency for fewer QPs and less NIC cache
		// pressure, which pays off once connections outnumber the cores or
		// when resources are the goal.
		p.QPSharing = p.Subscription == Over || goal == ResUtil
	}
	p.Credits = or(s.Credits, defaultCredits[goal])
	return p
}

// String renders the plan on one line for humans (hatgen explain, logs).
func (p Plan) String() string {
	var b strings.Builder
	size := "unknown"
	if p.MsgSize > 0 {
		size = FormatSize(p.MsgSize)
	}
	class := "small"
	if p.Large {
		class = "large"
	}
	fmt.Fprintf(&b, "goal=%s subscription=%s(%d/%d cores) msg=%s(%s) transport=%s protocol=%s polling=%s",
		p.Goal, p.Subscription, p.Concurrency, p.Cores, size, class, p.Transport, p.Protocol, p.Polling)
	inline := "off"
	if p.InlineThreshold > 0 {
		inline = "<=" + strconv.Itoa(p.InlineThreshold)
		if p.Inline {
			inline += "(yes)"
		} else {
			inline += "(no)"
		}
	}
	fmt.Fprintf(&b, " inline=%s eager_threshold=%s signal_interval=%d", inline, FormatSize(p.EagerThreshold), p.SignalInterval)
	if p.Protocol == ProtoRFP {
		fmt.Fprintf(&b, " rfp_retries=%d rfp_fetch_size=%s", p.RFPRetries, FormatSize(p.RFPFetchSize))
	}
	fmt.Fprintf(&b, " batch=%s", p.Batch)
	if p.Batch != BatchOff {
		fmt.Fprintf(&b, " batch_bytes=%s batch_timeout=%s", FormatSize(p.BatchBytes), FormatDuration(p.BatchTimeout))
		if p.Batch == BatchAuto {
			fmt.Fprintf(&b, " latency_limit=%s batch_alpha=%g", FormatDuration(p.LatencyLimit), p.BatchAlpha)
		}
	}
	share := "off"
	if p.QPSharing {
		share = "on"
	}
	timeout := "none"
	if p.Timeout > 0 {
		timeout = FormatDuration(p.Timeout)
	}
	fmt.Fprintf(&b, " qp_sharing=%s credits=%d numa=%s timeout=%s", share, p.Credits, p.NUMA, timeout)
	return b.String()
}
