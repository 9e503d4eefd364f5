package hatkv

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/hints"
)

// ErrConfig is wrapped by every configuration error (bad hint value, a
// store-wide hint set differently on one function, an unknown transport).
var ErrConfig = errors.New("hatkv: invalid configuration")

// ErrTransportUnavailable is returned when an explicitly chosen transport
// (shm, rdma) cannot be used: no such device here, or the server did not
// grant it.
var ErrTransportUnavailable = errors.New("hatkv: transport not available")

// defaultGroupBatch is kvstore's own default, used when only the delay is set.
const defaultGroupBatch = 256

// appPrefix marks the application hints HatKV reads from the IDL.
const appPrefix = "kv."

// storeKeys are the kv.* hints that configure the whole LMDB environment;
// they cannot vary per function.
var storeKeys = []string{"sync", "commit", "writemap", "mapsize", "group_batch", "group_delay"}

// Config is the storage configuration the server derives from the IDL's
// hints, optionally overridden from the command line.
type Config struct {
	Sync        kvstore.SyncMode
	Commit      kvstore.CommitMode
	WriteMap    bool
	MapSize     int64 // 0: kvstore's default
	GroupBatch  int   // 0: kvstore's default
	GroupDelay  time.Duration
	Concurrency int // LMDB reader slots; from the `concurrency` hint
	Limits      kvstore.Limits
	// Sources says, per setting, where its value came from ("hint" or
	// "flag"), for the startup log line.
	Sources map[string]string
	// groupCommit is what kv.commit=auto resolves to: the service's plan
	// decides (see autoCommit).
	groupCommit bool
}

// autoCommit is the co-design rule for kv.commit=auto (also used when the
// IDL has no kv.commit): group commit when the service is planned for
// throughput or is over-subscribed, because then many writers wait on the
// same fsync and one transaction can carry them all; immediate otherwise,
// so a lone writer never waits for a batch.
func autoCommit(server hints.Set, cores int) bool {
	p := hints.TableFor(server, hints.Env{Side: hints.SideServer, Cores: cores})
	return p.Goal == hints.Throughput || p.Subscription == hints.Over
}

// ConfigFromHints reads the server side of svc: the kv.* application hints
// of the service level and `concurrency`. A function whose kv.* hint differs
// from the service's is an error, because LMDB applies these settings to
// the whole environment.
func ConfigFromHints(svc *hints.Service) (Config, error) {
	cfg := Config{
		Concurrency: svc.Server.Concurrency,
		Sources:     map[string]string{"concurrency": "hint", "commit": "auto"},
		groupCommit: autoCommit(svc.Server, runtime.NumCPU()),
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.groupCommit {
		cfg.Commit = kvstore.CommitGroup
	}
	base := svc.Server.App
	for _, fn := range svc.Functions {
		for _, k := range storeKeys {
			key := appPrefix + k
			if v, ok := fn.Server.App[key]; ok && v != base[key] {
				return Config{}, fmt.Errorf("%w: hint %s=%s on function %s differs from the service level (%q): it is store-wide",
					ErrConfig, key, v, fn.Name, base[key])
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(base)) {
		if !strings.HasPrefix(k, appPrefix) {
			continue
		}
		if err := cfg.Set(strings.TrimPrefix(k, appPrefix), base[k], "hint"); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// DefaultConfig is the configuration baked into the generated hint table.
func DefaultConfig() Config {
	cfg, err := ConfigFromHints(&hatkv.HatKVHints)
	if err != nil {
		// The IDL is checked in and TestDefaultConfigFollowsIDL covers it.
		panic(err)
	}
	return cfg
}

// Set applies one setting by its hint name without the "kv." prefix (sync,
// commit, writemap, mapsize, group_batch, group_delay, concurrency).
// commit=auto follows the service's plan (see autoCommit). Sizes
// and durations use the hint syntax (docs/hints.md: 1GiB, 5ms).
func (c *Config) Set(key, value, source string) error {
	var err error
	switch strings.ToLower(key) {
	case "sync":
		c.Sync, err = kvstore.ParseSyncMode(value)
	case "commit":
		if strings.EqualFold(strings.TrimSpace(value), "auto") {
			c.Commit = kvstore.CommitImmediate
			if c.groupCommit {
				c.Commit = kvstore.CommitGroup
			}
			break
		}
		c.Commit, err = kvstore.ParseCommitMode(value)
	case "writemap":
		c.WriteMap, err = parseBool(value)
	case "mapsize":
		var n int
		if n, err = hints.ParseSize(value); err == nil && n < 1<<20 {
			err = fmt.Errorf("map size must be at least 1MiB, got %d bytes", n)
		}
		c.MapSize = int64(n)
	case "group_batch":
		c.GroupBatch, err = hints.ParseCount(value)
	case "group_delay":
		c.GroupDelay, err = hints.ParseDuration(value)
	case "concurrency":
		c.Concurrency, err = hints.ParseCount(value)
	default:
		err = fmt.Errorf("unknown setting (want one of %s, concurrency)", strings.Join(storeKeys, ", "))
	}
	if err != nil {
		return fmt.Errorf("%w: kv.%s=%s: %w", ErrConfig, key, value, err)
	}
	if c.Sources == nil {
		c.Sources = map[string]string{}
	}
	c.Sources[key] = source
	return nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "true", "1", "yes":
		return true, nil
	case "off", "false", "0", "no":
		return false, nil
	}
	return false, fmt.Errorf("want on|off, got %q", v)
}

// Options turns the configuration into kvstore options.
func (c Config) Options() []kvstore.Option {
	opts := []kvstore.Option{
		kvstore.WithSync(c.Sync),
		kvstore.WithCommit(c.Commit),
		kvstore.WithWriteMap(c.WriteMap),
		kvstore.WithConcurrency(max(c.Concurrency, 1)),
		kvstore.WithLimits(c.Limits),
	}
	if c.MapSize > 0 {
		opts = append(opts, kvstore.WithMapSize(c.MapSize))
	}
	if c.GroupBatch > 0 || c.GroupDelay > 0 {
		batch := c.GroupBatch
		if batch == 0 {
			batch = defaultGroupBatch
		}
		opts = append(opts, kvstore.WithGroupCommit(batch, c.GroupDelay))
	}
	return opts
}

// String renders the configuration for the startup log; settings
// overridden on the command line are marked "(flag)".
func (c Config) String() string {
	mark := func(key string) string {
		if c.Sources[key] == "flag" {
			return "(flag)"
		}
		return ""
	}
	mapSize := "default"
	if c.MapSize > 0 {
		mapSize = hints.FormatSize(int(c.MapSize))
	}
	return fmt.Sprintf("sync=%v%s commit=%v%s writemap=%v%s mapsize=%s%s max_readers=%d%s",
		c.Sync, mark("sync"), c.Commit, mark("commit"), c.WriteMap, mark("writemap"),
		mapSize, mark("mapsize"), c.Concurrency, mark("concurrency"))
}
