package flock

import (
	"time"

	"github.com/hatrpc/hatrpc/pkg/hints"
)

type config struct {
	qps           int
	credits       int
	maxBatch      int
	ringSize      int
	maxMsg        int
	memSlot       int
	schedInterval time.Duration
	maxAQP        int
	workers       int
	metrics       *Metrics
	mutexShared   bool // benchmark baseline: QP behind a mutex, no coalescing
	idleSleep     time.Duration
	maxReply      int
	inline        func(handler uint16, req []byte) bool
	sent          func(handler uint16, size int)
}

func defaultConfig() config {
	return config{qps: 4, credits: 32, maxBatch: 32, ringSize: 256 << 10, maxMsg: 32 << 10, memSlot: 4096,
		schedInterval: 10 * time.Millisecond, maxAQP: 256, maxReply: 64 << 20}
}

// Option configures Dial and NewServer.
type Option func(*config)

// WithQPs sets how many RC QPs a connection owns (client; default 4).
func WithQPs(n int) Option { return func(c *config) { c.qps = n } }

// WithCredits sets C, the credits a QP starts with and gets per renewal
// (server; default 32).
func WithCredits(n int) Option { return func(c *config) { c.credits = n } }

// WithMaxBatch bounds how many callers a leader coalesces into one message
// (default 32).
func WithMaxBatch(n int) Option { return func(c *config) { c.maxBatch = n } }

// WithRingSize sets the size of each QP's receive ring: responses on the
// client, requests on the server (a multiple of 64; default 256 KiB).
func WithRingSize(n int) Option { return func(c *config) { c.ringSize = n } }

// WithMaxMessage bounds one coalesced message (default 32 KiB); a single
// request or response must fit in it with its header.
func WithMaxMessage(n int) Option { return func(c *config) { c.maxMsg = n } }

// WithMaxReply bounds one response (default 64 MiB): a response larger
// than a message travels in parts that the client joins.
func WithMaxReply(n int) Option { return func(c *config) { c.maxReply = n } }

// WithMaxMemOp bounds one Read or Write (client; default 4 KiB).
func WithMaxMemOp(n int) Option { return func(c *config) { c.memSlot = n } }

// WithSchedInterval sets the scheduling interval: the goroutine scheduler
// on the client, the QP scheduler on the server (default 10ms; 0 disables
// periodic rescheduling).
func WithSchedInterval(d time.Duration) Option { return func(c *config) { c.schedInterval = d } }

// WithMaxActiveQPs sets MAX_AQP, the active QPs the server allows over all
// senders (server; default 256).
func WithMaxActiveQPs(n int) Option { return func(c *config) { c.maxAQP = n } }

// WithWorkers runs handlers on a pool of n goroutines (server). The
// default, 0, runs them on the dispatcher, which coalesces all responses to
// one request message into one response message; use a pool for handlers
// that block.
func WithWorkers(n int) Option { return func(c *config) { c.workers = n } }

// WithInline lets requests run on the dispatcher despite WithWorkers:
// those for which never reports true (it runs on the dispatcher, per
// request, and must be quick) are handled there, reading req in the ring,
// and their responses leave coalesced; the rest go to the workers. For
// handlers declared short and non-blocking (the never_blocks hint): a
// worker costs a copy of the request and a goroutine wake-up per call.
func WithInline(never func(handler uint16, req []byte) bool) Option {
	return func(c *config) { c.inline = never }
}

// WithSent calls sent once each response an AppendHandler returned has
// left the server (posted, or dropped with its peer): size is the length
// the handler returned. A server that counts its responses' memory until
// they are taken gives it back there. sent runs on the goroutine that
// posted the response and must be quick.
func WithSent(sent func(handler uint16, size int)) Option {
	return func(c *config) { c.sent = sent }
}

// WithMetrics records into m instead of a private Metrics.
func WithMetrics(m *Metrics) Option { return func(c *config) { c.metrics = m } }

// withMutexSharing makes every QP a plain mutex-protected QP with one
// request per message: the baseline the benchmarks compare against.
func withMutexSharing() Option { return func(c *config) { c.mutexShared = true } }

// withIdleSleep sets how long a server's rings stay empty before its
// dispatcher may sleep on the doorbell (default 0: once its spin ended).
func withIdleSleep(d time.Duration) Option { return func(c *config) { c.idleSleep = d } }

func (c *config) valid() bool {
	return c.qps >= 1 && c.qps <= 4096 && c.credits >= 2 && c.maxBatch >= 1 && c.maxBatch <= maxMsgCount &&
		c.ringSize > 0 && c.ringSize%msgAlign == 0 && c.maxMsg >= minMsgLen+metaLen+8 &&
		c.maxMsg+msgAlign <= c.ringSize && c.memSlot >= 8 && c.memSlot%8 == 0 && c.maxAQP >= 1 && c.workers >= 0 && c.maxReply > 0
}

// WithPlan applies the plan table of a function (hints.TableFor):
// `credits` sets C, and `qp_sharing` decides whether callers share QPs —
// on: the connection keeps its shared set (never more QPs than concurrent
// callers); off: every concurrent caller gets its own QP. Options after
// WithPlan override it.
func WithPlan(p *hints.Table) Option {
	return func(c *config) {
		if p.Credits > 0 {
			c.credits = max(p.Credits, 2)
		}
		conc := max(p.Concurrency, 1)
		if p.QPSharing {
			c.qps = min(c.qps, conc)
		} else {
			c.qps = min(conc, 4096)
		}
	}
}
