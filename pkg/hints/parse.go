package hints

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors. Every resolver diagnostic and every parse error matches
// exactly one of them with errors.Is.
var (
	ErrUnknownKey = errors.New("hints: unknown key")
	ErrBadValue   = errors.New("hints: bad value")
	ErrRange      = errors.New("hints: value out of range")
	ErrScope      = errors.New("hints: key not allowed at this scope")
	ErrSide       = errors.New("hints: key not allowed on this side")
	ErrConflict   = errors.New("hints: conflicting values")
	ErrDuplicate  = errors.New("hints: duplicate key")
)

// ValueError reports a value that does not parse as its type.
type ValueError struct {
	Value string // as written
	Type  string // size, duration, integer, goal, ...
	Want  string // human description of the accepted forms
}

func (e *ValueError) Error() string {
	return fmt.Sprintf("bad %s %q: want %s", e.Type, e.Value, e.Want)
}

func (e *ValueError) Unwrap() error { return ErrBadValue }

// RangeError reports a well-formed value outside the key's range.
type RangeError struct {
	Value string
	Msg   string // e.g. "must be at least 1"
}

func (e *RangeError) Error() string { return fmt.Sprintf("value %q %s", e.Value, e.Msg) }

func (e *RangeError) Unwrap() error { return ErrRange }

func isRange(err error, target **RangeError) bool { return errors.As(err, target) }

// MaxSize caps sizes at 1 TiB: nothing a hint describes (a payload, a fetch
// window, a threshold) can sensibly be larger, and the cap keeps arithmetic
// on sizes far from int overflow on every platform the runtime supports.
const MaxSize = 1 << 40

// Size units. KB, MB, GB are binary (1024-based), like KiB, MiB, GiB,
// because the HatRPC paper and RDMA practice use "4KB" for 4096 bytes (the
// Hybrid-EagerRNDV slot size, §4.3). Units are case-insensitive.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

const sizeWant = "a size like 512, 4KB, 4KiB, 1MB"

// ParseSize parses a byte size: a non-negative integer with an optional unit
// (B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB; all 1024-based). A number
// without a unit is bytes.
func ParseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	neg := strings.HasPrefix(t, "-")
	if neg {
		t = t[1:]
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, &ValueError{Value: s, Type: "size", Want: sizeWant}
	}
	mult, ok := sizeUnits[strings.ToLower(t[i:])]
	if !ok {
		return 0, &ValueError{Value: s, Type: "size", Want: sizeWant}
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || n > MaxSize/mult {
		return 0, &RangeError{Value: s, Msg: "must be at most 1TiB"}
	}
	if neg && n != 0 {
		return 0, &RangeError{Value: s, Msg: "must not be negative"}
	}
	return int(n * mult), nil
}

// FormatSize renders n with the largest binary unit that divides it exactly,
// so that FormatSize(ParseSize(x)) parses back to the same number.
func FormatSize(n int) string {
	units := []struct {
		suffix string
		mult   int
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	if n != 0 {
		for _, u := range units {
			if n%u.mult == 0 {
				return strconv.Itoa(n/u.mult) + u.suffix
			}
		}
	}
	return strconv.Itoa(n)
}

// ParseInt parses a decimal integer (optionally negative; the key decides
// the range).
func ParseInt(s string) (int, error) {
	t := strings.TrimSpace(s)
	digits := strings.TrimPrefix(t, "-")
	if !isDigits(digits) {
		return 0, &ValueError{Value: s, Type: "integer", Want: "an integer"}
	}
	n, err := strconv.ParseInt(t, 10, 32)
	if err != nil {
		return 0, &RangeError{Value: s, Msg: fmt.Sprintf("must be between %d and %d", math.MinInt32, math.MaxInt32)}
	}
	return int(n), nil
}

// ParseCount parses a positive integer (>= 1).
func ParseCount(s string) (int, error) {
	n, err := ParseInt(s)
	if err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, &RangeError{Value: s, Msg: "must be at least 1"}
	}
	return n, nil
}

const durationWant = "a duration like 50us, 2ms, 1s"

// ParseDuration parses a non-negative duration with a mandatory unit (ns,
// us/µs, ms, s, m, h; Go syntax, so 1.5ms and 1m30s work). A bare number is
// rejected because "timeout=100" is ambiguous.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	d, err := time.ParseDuration(t)
	if err != nil || strings.Trim(t, "+-0123456789.") == "" {
		return 0, &ValueError{Value: s, Type: "duration", Want: durationWant}
	}
	if d < 0 {
		return 0, &RangeError{Value: s, Msg: "must not be negative"}
	}
	return d, nil
}

// FormatDuration renders d in the hint spelling (us rather than µs).
func FormatDuration(d time.Duration) string {
	return strings.ReplaceAll(d.String(), "µs", "us")
}

// ParseFraction parses a number in (0, 1), or a percentage like 5%.
func ParseFraction(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || strings.ContainsAny(t, "xXpPiInN_") {
		return 0, &ValueError{Value: s, Type: "fraction", Want: "a fraction like 0.05 or 5%"}
	}
	if pct {
		f /= 100
	}
	if f <= 0 || f >= 1 {
		return 0, &RangeError{Value: s, Msg: "must be between 0 and 1 (exclusive)"}
	}
	return f, nil
}
