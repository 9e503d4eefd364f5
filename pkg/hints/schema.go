package hints

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ValueType is the type of a hint key's value.
type ValueType int

const (
	TypeEnum     ValueType = iota // one of Key.Values
	TypeInt                       // decimal integer
	TypeSize                      // byte size: 512, 4KB, 4KiB, 1MB (KB = KiB = 1024)
	TypeDuration                  // duration with unit: 50us, 2ms, 1s
	TypeFraction                  // 0 < x < 1, or a percentage: 0.05, 5%
	TypeNUMA                      // node id, nic or none
	TypeBatch                     // off, auto or a count
)

func (t ValueType) String() string {
	return enumString([]string{"enum", "int", "size", "duration", "fraction", "numa", "batch"}, "ValueType", int(t))
}

// Scope says where a key may be written.
type Scope int

const (
	ScopeAny     Scope = iota // service or function level
	ScopeService              // service level only (connection-wide settings)
)

func (s Scope) String() string {
	return enumString([]string{"service, function", "service"}, "Scope", int(s))
}

// SideRule says which groups may carry a key. A one-sided key written in a
// shared `hint:` group applies to its own side only.
type SideRule int

const (
	SideBoth       SideRule = iota // hint, s_hint, c_hint
	SideClientOnly                 // hint, c_hint
	SideServerOnly                 // hint, s_hint
)

func (s SideRule) String() string {
	return enumString([]string{"both", "client", "server"}, "SideRule", int(s))
}

func (s SideRule) allows(side Side) bool {
	switch s {
	case SideClientOnly:
		return side == SideClient
	case SideServerOnly:
		return side == SideServer
	}
	return true
}

// Key describes one hint key. The table returned by Keys drives validation,
// resolution, `hatgen explain` and docs/hints.md (a test keeps the document
// in sync with the table).
type Key struct {
	Name    string
	Aliases []string // accepted as written, e.g. proto for protocol
	Type    ValueType
	Values  []string // the canonical spellings of an enum type
	Default string   // the default in hint spelling
	Scope   Scope
	Side    SideRule
	Doc     string

	// apply parses raw, stores it into s and returns the canonical spelling.
	apply func(s *Set, raw string) (string, error)
}

// Keys returns the hint schema in its canonical order.
func Keys() []Key { return append([]Key(nil), schema...) }

// LookupKey finds a key by name or alias.
func LookupKey(name string) (Key, bool) {
	if k, ok := keyIndex[name]; ok {
		return schema[k], true
	}
	return Key{}, false
}

var keyIndex = func() map[string]int {
	m := make(map[string]int)
	for i, k := range schema {
		for _, n := range append([]string{k.Name}, k.Aliases...) {
			if _, dup := m[n]; dup {
				panic("hints: duplicate key name " + n)
			}
			m[n] = i
		}
	}
	return m
}()

// Limits that catch typos without constraining real deployments.
const (
	maxConcurrency = 1 << 20
	maxCount       = 1 << 16
)

func intIn(raw string, lo, hi int, dst *int) (string, error) {
	n, err := ParseInt(raw)
	if err != nil {
		return "", err
	}
	if n < lo {
		return "", &RangeError{Value: raw, Msg: fmt.Sprintf("must be at least %d", lo)}
	}
	if n > hi {
		return "", &RangeError{Value: raw, Msg: fmt.Sprintf("must be at most %d", hi)}
	}
	*dst = n
	return strconv.Itoa(n), nil
}

func sizeAtLeast(raw string, lo int, dst *int) (string, error) {
	n, err := ParseSize(raw)
	if err != nil {
		return "", err
	}
	if n < lo {
		return "", &RangeError{Value: raw, Msg: fmt.Sprintf("must be at least %d", lo)}
	}
	*dst = n
	return FormatSize(n), nil
}

// onOff sets *dst from an on/off hint's raw value (its aliases too) and
// returns the value's canonical spelling.
func onOff(key, raw string, dst *bool) (string, error) {
	v, ok := enumParse(onOffNames, switchAliases, raw)
	if !ok {
		return "", enumErr(key, raw, onOffNames)
	}
	*dst = v == 1
	return onOffNames[v], nil
}

// durationOrNone is positiveDuration for a key whose default is none
// (0), which a function can set to reset a service-level value.
func durationOrNone(raw string, dst *time.Duration) (string, error) {
	if isWord(raw, "none") {
		*dst = 0
		return "none", nil
	}
	return positiveDuration(raw, dst)
}

func positiveDuration(raw string, dst *time.Duration) (string, error) {
	d, err := ParseDuration(raw)
	if err != nil {
		return "", err
	}
	if d <= 0 {
		return "", &RangeError{Value: raw, Msg: "must be positive"}
	}
	*dst = d
	return FormatDuration(d), nil
}

// Built-in defaults for the numeric keys, applied by the planner (TableFor).
const (
	// DefaultEagerThreshold is HatRPC's Hybrid-EagerRNDV switch point and
	// eager slot size (HatRPC §4.3: "equal to the Hybrid-EagerRNDV threshold
	// (4KB)").
	DefaultEagerThreshold = 4 << 10
	// DefaultRFPRetries is RFP's R: remote-fetch retries before falling back
	// to server-reply (RF-RPC §3.2 picks R within [1, N] with N = 5, and the
	// evaluation, §5.1, runs with R = 5).
	DefaultRFPRetries = 5
	// DefaultRFPFetchSize is RFP's F, the first-read size that should cover
	// header plus result (RF-RPC §3.2; §5.1 selects F = 256 bytes).
	DefaultRFPFetchSize = 256
	// DefaultBatchBytes is RFP's batch size limit L ("typically set to 2048
	// bytes", RF-RPC §4.1).
	DefaultBatchBytes = 2 << 10
	// DefaultBatchTimeout is RFP's batch time-out T (5 ms, RF-RPC §4.1).
	DefaultBatchTimeout = 5 * time.Millisecond
	// DefaultBatchAlpha is the auto-batch tolerance α: at most 5% of calls
	// may exceed latency_limit (RF-RPC §4.2/§5.4 evaluate with 5%).
	DefaultBatchAlpha = 0.05
	// DefaultLatencyLimit is l_limit for batch=auto when none is hinted. RFP
	// leaves it to the user; 1 ms is an order of magnitude above an RDMA
	// round trip, so batching still has room to help.
	DefaultLatencyLimit = time.Millisecond
	// DefaultInlineThreshold keeps payload plus frame header within two
	// cache lines, the same reasoning RF-RPC §3.2 uses for its 92-byte
	// inline limit; the runtime further caps it at the device's
	// max_inline_data.
	DefaultInlineThreshold = 128
	// DefaultSignalInterval requests a completion for every 64th send (the
	// selective signalling CommonRDMA and HERD use); the runtime caps it at
	// half the send queue depth.
	DefaultSignalInterval = 64
	// DefaultRetries is how often pkg/cluster and a client.Conn send an
	// idempotent call again: with three servers, two more attempts reach every one.
	DefaultRetries = 2
)

// maxRetries bounds the retries key: more attempts than this only add
// load to servers that are already failing.
const maxRetries = 10

var schema = []Key{
	{Name: "perf_goal", Type: TypeEnum, Values: goalNames, Default: "latency",
		Doc: "optimization goal; selects polling and protocol (HatRPC Fig. 6)",
		apply: func(s *Set, raw string) (string, error) {
			v, err := ParseGoal(raw)
			s.PerfGoal = v
			return v.String(), err
		}},
	{Name: "concurrency", Type: TypeInt, Default: "1",
		Doc: "concurrent callers (client) or connections (server); compared with the cores for under/full/over-subscription",
		apply: func(s *Set, raw string) (string, error) {
			return intIn(raw, 1, maxConcurrency, &s.Concurrency)
		}},
	{Name: "payload_size", Type: TypeSize, Default: "auto",
		Doc: "typical message size; client side: the request, server side: the response; auto uses the actual size",
		apply: func(s *Set, raw string) (string, error) {
			if isWord(raw, "auto") {
				s.PayloadSize = 0
				return "auto", nil
			}
			return sizeAtLeast(raw, 1, &s.PayloadSize)
		}},
	{Name: "polling", Aliases: []string{"perf_pref"}, Type: TypeEnum, Values: pollingNames, Default: "auto",
		Doc: "completion polling; auto follows the goal",
		apply: func(s *Set, raw string) (string, error) {
			v, err := ParsePolling(raw)
			s.Polling = v
			return v.String(), err
		}},
	{Name: "protocol", Aliases: []string{"proto"}, Type: TypeEnum, Values: protocolNames, Default: "auto",
		Doc: "RDMA message protocol (HatRPC Fig. 3); auto follows the goal, hybrid is eager below eager_threshold and write_rndv above",
		apply: func(s *Set, raw string) (string, error) {
			v, err := ParseProtocol(raw)
			s.Protocol = v
			return v.String(), err
		}},
	{Name: "transport", Type: TypeEnum, Values: transportNames, Default: "auto",
		Doc: "transport; auto lets the runtime pick the best one both peers support",
		apply: func(s *Set, raw string) (string, error) {
			v, err := ParseTransport(raw)
			s.Transport = v
			return v.String(), err
		}},
	{Name: "numa", Type: TypeNUMA, Values: []string{"<node id>", "nic", "none"}, Default: "none", Scope: ScopeService,
		Doc: "NUMA binding of the polling threads and buffers: a node id, the NIC's node, or none",
		apply: func(s *Set, raw string) (string, error) {
			v, err := ParseNUMA(raw)
			s.NUMA = v
			return v.String(), err
		}},
	{Name: "rfp_retries", Type: TypeInt, Default: strconv.Itoa(DefaultRFPRetries), Side: SideClientOnly,
		Doc: "RFP R: remote-fetch retries before switching to server-reply",
		apply: func(s *Set, raw string) (string, error) {
			return intIn(raw, 1, maxCount, &s.RFPRetries)
		}},
	{Name: "rfp_fetch_size", Type: TypeSize, Default: strconv.Itoa(DefaultRFPFetchSize), Side: SideClientOnly,
		Doc: "RFP F: bytes fetched by the first remote read (header plus result)",
		apply: func(s *Set, raw string) (string, error) {
			return sizeAtLeast(raw, 1, &s.RFPFetchSize)
		}},
	{Name: "batch", Type: TypeBatch, Values: []string{"off", "<N>", "auto"}, Default: "off", Side: SideClientOnly,
		Doc: "request batching: off, at most N requests per batch, or auto-tuned under latency_limit (RFP §4)",
		apply: func(s *Set, raw string) (string, error) {
			v, err := ParseBatch(raw)
			s.Batch = v
			return v.String(), err
		}},
	{Name: "batch_bytes", Type: TypeSize, Default: FormatSize(DefaultBatchBytes), Side: SideClientOnly,
		Doc: "RFP L: a batch is sent once its payload reaches this size",
		apply: func(s *Set, raw string) (string, error) {
			return sizeAtLeast(raw, 1, &s.BatchBytes)
		}},
	{Name: "batch_timeout", Type: TypeDuration, Default: FormatDuration(DefaultBatchTimeout), Side: SideClientOnly,
		Doc: "RFP T: a partial batch is sent after this long",
		apply: func(s *Set, raw string) (string, error) {
			return positiveDuration(raw, &s.BatchTimeout)
		}},
	{Name: "batch_alpha", Type: TypeFraction, Default: strconv.FormatFloat(DefaultBatchAlpha, 'g', -1, 64), Side: SideClientOnly,
		Doc: "RFP α: share of calls allowed above latency_limit under batch=auto",
		apply: func(s *Set, raw string) (string, error) {
			v, err := ParseFraction(raw)
			if err != nil {
				return "", err
			}
			s.BatchAlpha = v
			return strconv.FormatFloat(v, 'g', -1, 64), nil
		}},
	{Name: "latency_limit", Type: TypeDuration, Default: FormatDuration(DefaultLatencyLimit), Side: SideClientOnly,
		Doc: "RFP l_limit: latency bound batch=auto keeps (1-α) of the calls under",
		apply: func(s *Set, raw string) (string, error) {
			return positiveDuration(raw, &s.LatencyLimit)
		}},
	{Name: "inline_threshold", Type: TypeSize, Default: strconv.Itoa(DefaultInlineThreshold),
		Doc: "sends up to this size are posted inline; 0 disables inlining",
		apply: func(s *Set, raw string) (string, error) {
			str, err := sizeAtLeast(raw, 0, &s.InlineThreshold)
			if err == nil && s.InlineThreshold == 0 {
				s.InlineThreshold = InlineDisabled
			}
			return str, err
		}},
	{Name: "eager_threshold", Type: TypeSize, Default: FormatSize(DefaultEagerThreshold),
		Doc: "small/large message boundary: eager slot size and rendezvous switch point",
		apply: func(s *Set, raw string) (string, error) {
			return sizeAtLeast(raw, 1, &s.EagerThreshold)
		}},
	{Name: "signal_interval", Type: TypeInt, Default: strconv.Itoa(DefaultSignalInterval), Scope: ScopeService,
		Doc: "request a send completion every N work requests (selective signalling)",
		apply: func(s *Set, raw string) (string, error) {
			return intIn(raw, 1, maxCount, &s.SignalInterval)
		}},
	{Name: "qp_sharing", Type: TypeEnum, Values: switchNames, Default: "auto", Scope: ScopeService,
		Doc: "share queue pairs between connections; auto shares when over-subscribed or for res_util",
		apply: func(s *Set, raw string) (string, error) {
			v, err := ParseSwitch(raw)
			s.QPSharing = v
			return v.String(), err
		}},
	{Name: "credits", Type: TypeInt, Default: "auto", Scope: ScopeService,
		Doc: "receive slots (flow-control credits) per connection; auto depends on the goal",
		apply: func(s *Set, raw string) (string, error) {
			if isWord(raw, "auto") {
				s.Credits = 0
				return "auto", nil
			}
			return intIn(raw, 1, maxCount, &s.Credits)
		}},
	{Name: "borrow_args", Type: TypeEnum, Values: onOffNames, Default: "off", Side: SideServerOnly,
		Doc: "on: the handler (and its interceptors) keeps no argument, nor any part of one, once it returns, so binary arguments are decoded in place in the request's buffer, which is reused as soon as the reply is written (TCP)",
		apply: func(s *Set, raw string) (string, error) {
			return onOff("borrow_args", raw, &s.BorrowArgs)
		}},
	{Name: "borrow_ctx", Type: TypeEnum, Values: onOffNames, Default: "off", Side: SideServerOnly,
		Doc: "on: the handler (and its interceptors) keeps neither its context nor one made from it once it returns, so a lane reuses the call's context for its next call instead of allocating one a call",
		apply: func(s *Set, raw string) (string, error) {
			return onOff("borrow_ctx", raw, &s.BorrowCtx)
		}},
	{Name: "borrow_msgs", Type: TypeEnum, Values: onOffNames, Default: "off",
		Doc: "on: a streaming function's receiver keeps no binary value of a message it received, nor any part of one, past its next RecvMsg (Recv) on that stream, nor past the stream's end, so binary values are decoded in place in the message's frame buffer, which is reused for a later message instead of each message getting memory of its own; off: every message owns its values",
		apply: func(s *Set, raw string) (string, error) {
			return onOff("borrow_msgs", raw, &s.BorrowMsgs)
		}},
	{Name: "never_blocks", Type: TypeEnum, Values: onOffNames, Default: "off", Side: SideServerOnly,
		Doc: "on: the handler (and its interceptors) returns within microseconds and never blocks (no I/O, no lock held by a slow path, no waiting for other calls), so over a shared QP (qp_sharing) it may run on the server's request dispatcher instead of a worker",
		apply: func(s *Set, raw string) (string, error) {
			return onOff("never_blocks", raw, &s.NeverBlocks)
		}},
	{Name: "timeout", Type: TypeDuration, Default: "none",
		Doc: "per-call deadline (client) or handler deadline (server), on top of the context's",
		apply: func(s *Set, raw string) (string, error) {
			return durationOrNone(raw, &s.Timeout)
		}},
	{Name: "idempotent", Type: TypeEnum, Values: onOffNames, Default: "off", Side: SideClientOnly,
		Doc: "on: running the function twice has the effect of running it once, so a multi-server client (pkg/cluster) may send it again, to another server, after a connection failure or timeout, and a client.Conn after a connection failure or an Unavailable status, or as a hedge; off: a call that may have reached a server is never sent again",
		apply: func(s *Set, raw string) (string, error) {
			return onOff("idempotent", raw, &s.Idempotent)
		}},
	{Name: "hedge", Type: TypeDuration, Default: "none", Side: SideClientOnly,
		Doc: "delay after which a client.Conn sends a second copy of a call of an idempotent function that has no answer yet, within its retry budget; the first answer wins and the other copy is cancelled; none: no hedging",
		apply: func(s *Set, raw string) (string, error) {
			return durationOrNone(raw, &s.Hedge)
		}},
	{Name: "retries", Type: TypeInt, Default: strconv.Itoa(DefaultRetries), Side: SideClientOnly,
		Doc: "attempts after the first for an idempotent function (pkg/cluster, client.Conn), with exponential backoff and jitter, within the caller's deadline; 0 disables them",
		apply: func(s *Set, raw string) (string, error) {
			str, err := intIn(raw, 0, maxRetries, &s.Retries)
			if err == nil && s.Retries == 0 {
				s.Retries = NoRetries
			}
			return str, err
		}},
	{Name: "stream_window", Type: TypeSize, Default: "auto",
		Doc: "a streaming function's receive window per stream on this side, in bytes (the message count follows, one per 128 bytes, at least 16); the peer sends at most that much ahead of this side's reading; auto: the connection's window (WithStreamWindow, 1MiB by default)",
		apply: func(s *Set, raw string) (string, error) {
			if isWord(raw, "auto") {
				s.StreamWindow = 0
				return "auto", nil
			}
			return sizeIn(raw, MinStreamWindow, MaxStreamWindow, &s.StreamWindow)
		}},
}

// Bounds of stream_window: below 1 KiB a window holds less than one
// frame of most messages and every message waits for credit; past 1 GiB
// it no longer bounds anything the way a window should, and a window
// frame carries 32 bits.
const (
	MinStreamWindow = 1 << 10
	MaxStreamWindow = 1 << 30
)

func sizeIn(raw string, lo, hi int, dst *int) (string, error) {
	n, err := ParseSize(raw)
	if err != nil {
		return "", err
	}
	if n < lo {
		return "", &RangeError{Value: raw, Msg: "must be at least " + FormatSize(lo)}
	}
	if n > hi {
		return "", &RangeError{Value: raw, Msg: "must be at most " + FormatSize(hi)}
	}
	*dst = n
	return FormatSize(n), nil
}

// isWord reports whether raw spells word. Keys whose default is a word
// (auto, none) accept it, so a function can reset a service-level value.
func isWord(raw, word string) bool { return strings.EqualFold(strings.TrimSpace(raw), word) }

// appKeyValid reports whether k is an application key: two or more
// identifier segments joined by dots (kv.sync, app.cache.size).
func appKeyValid(k string) bool {
	parts := strings.Split(k, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		for i, c := range p {
			ok := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9')
			if !ok {
				return false
			}
		}
	}
	return true
}
