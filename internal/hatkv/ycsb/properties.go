package ycsb

import (
	"bufio"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

//go:embed workloads/*
var workloadFS embed.FS

// Properties holds YCSB properties with -P/-p semantics: files are loaded
// in order, later keys override earlier ones, and Set (for -p) overrides
// everything loaded before it.
type Properties struct {
	m map[string]string
}

// NewProperties returns an empty property set.
func NewProperties() *Properties { return &Properties{m: map[string]string{}} }

// Load reads a property file (like -P file).
func (p *Properties) Load(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := p.LoadReader(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// LoadWorkload loads one of the embedded workloads by name (workloada ...
// workloadf, workloada_hatkv, workloadb_hatkv).
func (p *Properties) LoadWorkload(name string) error {
	f, err := workloadFS.Open("workloads/" + name)
	if err != nil {
		return fmt.Errorf("ycsb: unknown workload %q (have %s)", name, strings.Join(WorkloadNames(), ", "))
	}
	defer f.Close()
	return p.LoadReader(f)
}

// WorkloadNames lists the embedded workloads.
func WorkloadNames() []string {
	ents, err := fs.ReadDir(workloadFS, "workloads")
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// LoadReader parses the java.util.Properties subset YCSB files use:
// '#'/'!' comments, key=value, key:value or key value, and trailing
// backslash continuation lines.
func (p *Properties) LoadReader(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var pending strings.Builder
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if pending.Len() == 0 && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if cont := strings.TrimRight(line, " \t"); strings.HasSuffix(cont, `\`) && !strings.HasSuffix(cont, `\\`) {
			pending.WriteString(strings.TrimSuffix(cont, `\`))
			continue
		}
		pending.WriteString(line)
		full := pending.String()
		pending.Reset()
		key, val := splitProperty(full)
		if key == "" {
			return fmt.Errorf("line %d: missing key", lineNo)
		}
		p.m[key] = val
	}
	if pending.Len() > 0 {
		key, val := splitProperty(pending.String())
		if key != "" {
			p.m[key] = val
		}
	}
	return sc.Err()
}

func splitProperty(s string) (string, string) {
	i := strings.IndexAny(s, "=: \t")
	if i < 0 {
		return strings.TrimSpace(s), ""
	}
	key := strings.TrimSpace(s[:i])
	rest := strings.TrimLeft(s[i:], " \t")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = rest[1:]
	}
	return key, strings.TrimSpace(rest)
}

// Set sets a property (like -p key=value).
func (p *Properties) Set(key, value string) { p.m[key] = value }

// SetPair parses "key=value" as given to -p.
func (p *Properties) SetPair(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("ycsb: property %q is not key=value", kv)
	}
	p.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	return nil
}

// Get returns a property and whether it is set.
func (p *Properties) Get(key string) (string, bool) {
	v, ok := p.m[key]
	return v, ok
}

// String returns a property or def.
func (p *Properties) String(key, def string) string {
	if v, ok := p.m[key]; ok {
		return v
	}
	return def
}

// Keys returns all keys, sorted.
func (p *Properties) Keys() []string {
	keys := make([]string, 0, len(p.m))
	for k := range p.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Int returns an integer property or def.
func (p *Properties) Int(key string, def int64) (int64, error) {
	v, ok := p.m[key]
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, &PropertyError{Key: key, Value: v, Err: err}
	}
	return n, nil
}

// Float returns a float property or def.
func (p *Properties) Float(key string, def float64) (float64, error) {
	v, ok := p.m[key]
	if !ok || v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, &PropertyError{Key: key, Value: v, Err: err}
	}
	return f, nil
}

// Bool returns a boolean property or def.
func (p *Properties) Bool(key string, def bool) (bool, error) {
	v, ok := p.m[key]
	if !ok || v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &PropertyError{Key: key, Value: v, Err: err}
	}
	return b, nil
}

// PropertyError reports a property with an unusable value.
type PropertyError struct {
	Key   string
	Value string
	Err   error
}

func (e *PropertyError) Error() string {
	return fmt.Sprintf("ycsb: property %s=%q: %v", e.Key, e.Value, e.Err)
}

func (e *PropertyError) Unwrap() error { return e.Err }
