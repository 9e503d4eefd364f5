package kvstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// OptionsFromHints maps application hints given as strings (for example
// from the IDL or a command line) to options. Recognised keys: sync
// (always|nosync|nometasync), writemap (on|off|true|false), commit
// (immediate|group), concurrency (reader slots), mapsize (bytes, or with a
// KiB/MiB/GiB suffix), group_batch and group_delay (a Go duration).
func OptionsFromHints(hints map[string]string) ([]Option, error) {
	var opts []Option
	var batch int
	var delay time.Duration
	groupSet := false
	for k, v := range hints {
		v = strings.TrimSpace(v)
		switch strings.ToLower(k) {
		case "sync":
			m, err := ParseSyncMode(v)
			if err != nil {
				return nil, err
			}
			opts = append(opts, WithSync(m))
		case "writemap":
			on, err := parseOnOff(v)
			if err != nil {
				return nil, fmt.Errorf("kvstore: hint writemap: %w", err)
			}
			opts = append(opts, WithWriteMap(on))
		case "commit":
			m, err := ParseCommitMode(v)
			if err != nil {
				return nil, err
			}
			opts = append(opts, WithCommit(m))
		case "concurrency":
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("kvstore: hint concurrency: %w", err)
			}
			opts = append(opts, WithConcurrency(n))
		case "mapsize":
			n, err := parseSize(v)
			if err != nil {
				return nil, fmt.Errorf("kvstore: hint mapsize: %w", err)
			}
			opts = append(opts, WithMapSize(n))
		case "group_batch":
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("kvstore: hint group_batch: %w", err)
			}
			batch, groupSet = n, true
		case "group_delay":
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("kvstore: hint group_delay: %w", err)
			}
			delay, groupSet = d, true
		default:
			return nil, fmt.Errorf("kvstore: unknown hint %q", k)
		}
	}
	if groupSet {
		if batch == 0 {
			batch = defaultConfig().maxBatch
		}
		opts = append(opts, WithGroupCommit(batch, delay))
	}
	return opts, nil
}

func parseOnOff(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "on", "true", "1", "yes":
		return true, nil
	case "off", "false", "0", "no":
		return false, nil
	}
	return false, fmt.Errorf("want on|off, got %q", v)
}

func parseSize(v string) (int64, error) {
	mult := int64(1)
	for _, s := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if strings.HasSuffix(v, s.suffix) {
			v, mult = strings.TrimSpace(strings.TrimSuffix(v, s.suffix)), s.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, err
	}
	if n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %d%s out of range", n, v)
	}
	return n * mult, nil
}
