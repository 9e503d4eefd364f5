package ycsb

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// OpType is a workload operation.
type OpType int

// Operations; MultiRead and MultiUpdate are the HatRPC extension.
const (
	OpRead OpType = iota
	OpUpdate
	OpInsert
	OpScan
	OpReadModifyWrite
	OpMultiRead
	OpMultiUpdate
	numOps
)

var opNames = [...]string{"READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE", "MULTIREAD", "MULTIUPDATE"}

func (o OpType) String() string {
	if o >= 0 && o < numOps {
		return opNames[o]
	}
	return "OpType(" + strconv.Itoa(int(o)) + ")"
}

// proportionKeys maps each operation to its property.
var proportionKeys = [...]string{
	OpRead:            "readproportion",
	OpUpdate:          "updateproportion",
	OpInsert:          "insertproportion",
	OpScan:            "scanproportion",
	OpReadModifyWrite: "readmodifywriteproportion",
	OpMultiRead:       "multireadproportion",
	OpMultiUpdate:     "multiupdateproportion",
}

// ErrConfig is wrapped by every invalid-workload error.
var ErrConfig = errors.New("ycsb: invalid workload")

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// Config is a parsed core workload.
type Config struct {
	RecordCount    int64
	OperationCount int64
	InsertStart    int64
	InsertCount    int64

	FieldCount              int
	FieldLength             int
	FieldLengthDistribution string
	FieldNamePrefix         string
	ReadAllFields           bool
	WriteAllFields          bool

	KeyPrefix   string
	KeyLength   int // HatRPC: pad keys to this length (0: YCSB zeropadding only)
	ZeroPadding int
	Ordered     bool // insertorder=ordered

	// Proportions are normalised to sum to 1.
	Proportions [numOps]float64
	BatchSize   int

	RequestDistribution    string
	HotspotDataFraction    float64
	HotspotOpnFraction     float64
	MinScanLength          int
	MaxScanLength          int
	ScanLengthDistribution string

	// Client settings (YCSB client properties): threadcount, target
	// (total ops/s, 0 = unthrottled) and maxexecutiontime (seconds).
	ThreadCount      int
	Target           float64
	MaxExecutionTime time.Duration

	// Warnings lists adjustments made while parsing, e.g. normalisation.
	Warnings []string
}

// ParseConfig reads a core workload from properties, with YCSB defaults.
func ParseConfig(p *Properties) (*Config, error) {
	c := &Config{}
	var errs []error
	i64 := func(key string, def int64) int64 {
		v, err := p.Int(key, def)
		errs = append(errs, err)
		return v
	}
	f64 := func(key string, def float64) float64 {
		v, err := p.Float(key, def)
		errs = append(errs, err)
		return v
	}
	boolean := func(key string, def bool) bool {
		v, err := p.Bool(key, def)
		errs = append(errs, err)
		return v
	}
	c.RecordCount = i64("recordcount", 0)
	if c.RecordCount == 0 {
		c.RecordCount = math.MaxInt32
	}
	c.OperationCount = i64("operationcount", 0)
	c.InsertStart = i64("insertstart", 0)
	c.InsertCount = i64("insertcount", c.RecordCount-c.InsertStart)
	c.FieldCount = int(i64("fieldcount", 10))
	c.FieldLength = int(i64("fieldlength", 100))
	c.FieldLengthDistribution = p.String("fieldlengthdistribution", "constant")
	c.FieldNamePrefix = p.String("fieldnameprefix", "field")
	c.ReadAllFields = boolean("readallfields", true)
	c.WriteAllFields = boolean("writeallfields", false)
	c.KeyPrefix = p.String("keyprefix", "user")
	c.KeyLength = int(i64("keylength", 24))
	c.ZeroPadding = int(i64("zeropadding", 1))
	c.Ordered = p.String("insertorder", "hashed") != "hashed"
	c.BatchSize = int(i64("batchsize", 10))
	c.RequestDistribution = p.String("requestdistribution", "uniform")
	c.HotspotDataFraction = f64("hotspotdatafraction", 0.2)
	c.HotspotOpnFraction = f64("hotspotopnfraction", 0.8)
	c.MinScanLength = int(i64("minscanlength", 1))
	c.MaxScanLength = int(i64("maxscanlength", 1000))
	c.ScanLengthDistribution = p.String("scanlengthdistribution", "uniform")
	c.ThreadCount = int(i64("threadcount", 1))
	c.Target = f64("target", 0)
	c.MaxExecutionTime = time.Duration(i64("maxexecutiontime", 0)) * time.Second
	defaults := [numOps]float64{OpRead: 0.95, OpUpdate: 0.05}
	for op, key := range proportionKeys {
		c.Proportions[op] = f64(key, defaults[op])
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) validate() error {
	switch {
	case c.RecordCount < 0 || c.OperationCount < 0 || c.InsertStart < 0 || c.InsertCount < 0:
		return configErr("counts must not be negative")
	case c.RecordCount < c.InsertStart+c.InsertCount:
		return configErr("recordcount %d < insertstart %d + insertcount %d", c.RecordCount, c.InsertStart, c.InsertCount)
	case c.FieldCount < 1 || c.FieldLength < 1:
		return configErr("fieldcount and fieldlength must be >= 1")
	case c.BatchSize < 1:
		return configErr("batchsize must be >= 1, got %d", c.BatchSize)
	case c.MinScanLength < 1 || c.MaxScanLength < c.MinScanLength:
		return configErr("scan length range [%d,%d] is empty", c.MinScanLength, c.MaxScanLength)
	case c.KeyLength < 0 || c.ZeroPadding < 0:
		return configErr("keylength and zeropadding must not be negative")
	case c.ThreadCount < 1 || c.Target < 0 || math.IsNaN(c.Target) || c.MaxExecutionTime < 0:
		return configErr("threadcount must be >= 1, target and maxexecutiontime >= 0")
	}
	switch c.FieldLengthDistribution {
	case "constant", "uniform", "zipfian":
	default:
		return configErr("unknown fieldlengthdistribution %q", c.FieldLengthDistribution)
	}
	switch c.RequestDistribution {
	case "uniform", "zipfian", "latest", "hotspot", "sequential":
	default:
		return configErr("unknown requestdistribution %q", c.RequestDistribution)
	}
	switch c.ScanLengthDistribution {
	case "uniform", "zipfian":
	default:
		return configErr("unknown scanlengthdistribution %q", c.ScanLengthDistribution)
	}
	sum := 0.0
	for op, v := range c.Proportions {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return configErr("%s=%v must be a non-negative number", proportionKeys[op], v)
		}
		sum += v
	}
	if sum == 0 {
		return configErr("all operation proportions are zero")
	}
	if math.Abs(sum-1) > 1e-9 {
		parts := make([]string, 0, numOps)
		for op := range c.Proportions {
			c.Proportions[op] /= sum
			if c.Proportions[op] > 0 {
				parts = append(parts, fmt.Sprintf("%s=%.4g", proportionKeys[op], c.Proportions[op]))
			}
		}
		c.Warnings = append(c.Warnings, fmt.Sprintf("operation proportions sum to %g, not 1; normalised to %s", sum, strings.Join(parts, " ")))
	}
	return nil
}

// Workload generates keys, values and operations for one run. It is safe
// for concurrent use; each client thread passes its own *rand.Rand.
type Workload struct {
	cfg          *Config
	fieldNames   []string
	keySeq       *Counter             // load phase
	insertSeq    *AcknowledgedCounter // run phase inserts
	keyChooser   Generator
	fieldChooser Generator
	fieldLength  Generator
	scanLength   Generator
	ops          Discrete[OpType]
}

// NewWorkload builds the generators for cfg.
func NewWorkload(cfg *Config) (*Workload, error) {
	w := &Workload{
		cfg:       cfg,
		keySeq:    NewCounter(cfg.InsertStart),
		insertSeq: NewAcknowledgedCounter(cfg.RecordCount),
	}
	for i := 0; i < cfg.FieldCount; i++ {
		w.fieldNames = append(w.fieldNames, cfg.FieldNamePrefix+strconv.Itoa(i))
	}
	for op, p := range cfg.Proportions {
		w.ops.Add(OpType(op), p)
	}
	if w.ops.Len() == 0 {
		return nil, configErr("no operation has a positive proportion")
	}
	lo, hi := cfg.InsertStart, cfg.InsertStart+cfg.InsertCount-1
	switch cfg.RequestDistribution {
	case "uniform":
		w.keyChooser = NewUniform(lo, hi)
	case "sequential":
		w.keyChooser = &sequential{lo: lo, n: hi - lo + 1}
	case "zipfian":
		// As YCSB: size the key space for the expected inserts so that
		// which keys are popular does not shift as records are added.
		expected := int64(float64(cfg.OperationCount) * cfg.Proportions[OpInsert] * 2.0)
		w.keyChooser = NewScrambledZipfian(lo, hi+expected)
	case "latest":
		w.keyChooser = NewSkewedLatest(w.insertSeq)
	case "hotspot":
		h, err := NewHotspot(lo, hi, cfg.HotspotDataFraction, cfg.HotspotOpnFraction)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		w.keyChooser = h
	}
	w.fieldChooser = NewUniform(0, int64(cfg.FieldCount-1))
	switch cfg.FieldLengthDistribution {
	case "constant":
		w.fieldLength = Constant{V: int64(cfg.FieldLength)}
	case "uniform":
		w.fieldLength = NewUniform(1, int64(cfg.FieldLength))
	case "zipfian":
		w.fieldLength = NewZipfian(1, int64(cfg.FieldLength), ZipfianConstant)
	}
	if cfg.ScanLengthDistribution == "zipfian" {
		w.scanLength = NewZipfian(int64(cfg.MinScanLength), int64(cfg.MaxScanLength), ZipfianConstant)
	} else {
		w.scanLength = NewUniform(int64(cfg.MinScanLength), int64(cfg.MaxScanLength))
	}
	return w, nil
}

// Config returns the workload's configuration.
func (w *Workload) Config() *Config { return w.cfg }

// FieldNames returns the record's field names.
func (w *Workload) FieldNames() []string { return w.fieldNames }

type sequential struct {
	last
	lo, n int64
	ctr   Counter
}

func (s *sequential) Next(*rand.Rand) int64 {
	v := s.lo + s.ctr.Next(nil)%s.n
	s.v.Store(v)
	return v
}

// KeyName builds a YCSB key: prefix + (hashed unless ordered) number,
// zero-padded so that the key is at least KeyLength bytes long (24 by
// default, the paper's key size) and the number at least ZeroPadding
// digits.
func (w *Workload) KeyName(keynum int64) string {
	if !w.cfg.Ordered {
		keynum = FNVHash64(keynum)
	}
	digits := strconv.FormatInt(keynum, 10)
	pad := max(w.cfg.ZeroPadding, w.cfg.KeyLength-len(w.cfg.KeyPrefix))
	var b strings.Builder
	b.Grow(len(w.cfg.KeyPrefix) + max(pad, len(digits)))
	b.WriteString(w.cfg.KeyPrefix)
	for i := len(digits); i < pad; i++ {
		b.WriteByte('0')
	}
	b.WriteString(digits)
	return b.String()
}

// randomValue fills n bytes with printable characters, like YCSB's
// RandomByteIterator (six bytes per random draw).
func randomValue(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; {
		x := r.Uint64()
		for j := 0; j < 6 && i < n; j++ {
			b[i] = ' ' + byte(x%95)
			x /= 95
			i++
		}
	}
	return b
}

// Values builds a full record for an insert.
func (w *Workload) Values(r *rand.Rand) map[string][]byte {
	vals := make(map[string][]byte, len(w.fieldNames))
	for _, f := range w.fieldNames {
		vals[f] = randomValue(r, int(w.fieldLength.Next(r)))
	}
	return vals
}

// UpdateValues builds the fields an update writes: all fields with
// writeallfields, otherwise one random field.
func (w *Workload) UpdateValues(r *rand.Rand) map[string][]byte {
	if w.cfg.WriteAllFields {
		return w.Values(r)
	}
	f := w.fieldNames[w.fieldChooser.Next(r)]
	return map[string][]byte{f: randomValue(r, int(w.fieldLength.Next(r)))}
}

// readFields returns nil (all fields) or one random field.
func (w *Workload) readFields(r *rand.Rand) []string {
	if w.cfg.ReadAllFields {
		return nil
	}
	return []string{w.fieldNames[w.fieldChooser.Next(r)]}
}

// nextKeynum picks an existing key for a transaction, skipping numbers
// whose insert has not been acknowledged yet (YCSB CoreWorkload).
func (w *Workload) nextKeynum(r *rand.Rand) int64 {
	for {
		k := w.keyChooser.Next(r)
		if k <= w.insertSeq.Last() && k >= 0 {
			return k
		}
	}
}

// Operation is one generated request. Fields nil means all fields.
type Operation struct {
	Type       OpType
	Key        string
	Keys       []string // MultiRead, MultiUpdate
	Fields     []string
	Values     map[string][]byte   // Update, Insert, ReadModifyWrite
	Batch      []map[string][]byte // MultiUpdate, parallel to Keys
	ScanLength int
	// insertNum is acknowledged through Workload.Done after an insert.
	insertNum int64
}

// NextLoad returns the next load-phase insert (sequential key numbers).
func (w *Workload) NextLoad(r *rand.Rand) Operation {
	n := w.keySeq.Next(r)
	return Operation{Type: OpInsert, Key: w.KeyName(n), Values: w.Values(r), insertNum: -1}
}

// Next returns the next transaction-phase operation.
func (w *Workload) Next(r *rand.Rand) Operation {
	op := Operation{Type: w.ops.Next(r), insertNum: -1}
	switch op.Type {
	case OpRead:
		op.Key = w.KeyName(w.nextKeynum(r))
		op.Fields = w.readFields(r)
	case OpUpdate:
		op.Key = w.KeyName(w.nextKeynum(r))
		op.Values = w.UpdateValues(r)
	case OpReadModifyWrite:
		op.Key = w.KeyName(w.nextKeynum(r))
		op.Fields = w.readFields(r)
		op.Values = w.UpdateValues(r)
	case OpInsert:
		op.insertNum = w.insertSeq.Next(r)
		op.Key = w.KeyName(op.insertNum)
		op.Values = w.Values(r)
	case OpScan:
		op.Key = w.KeyName(w.nextKeynum(r))
		op.ScanLength = int(w.scanLength.Next(r))
		op.Fields = w.readFields(r)
	case OpMultiRead:
		op.Keys = w.batchKeys(r)
		op.Fields = w.readFields(r)
	case OpMultiUpdate:
		op.Keys = w.batchKeys(r)
		op.Batch = make([]map[string][]byte, len(op.Keys))
		for i := range op.Batch {
			op.Batch[i] = w.UpdateValues(r)
		}
	}
	return op
}

func (w *Workload) batchKeys(r *rand.Rand) []string {
	keys := make([]string, w.cfg.BatchSize)
	for i := range keys {
		keys[i] = w.KeyName(w.nextKeynum(r))
	}
	return keys
}

// Done must be called after an operation completed; for inserts it makes
// the new key eligible for later reads (even if the insert failed, as
// YCSB does, so a failure cannot stall the key chooser).
func (w *Workload) Done(op Operation) {
	if op.Type == OpInsert && op.insertNum >= 0 {
		w.insertSeq.Acknowledge(op.insertNum)
	}
}
