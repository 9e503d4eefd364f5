package ycsb

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func FuzzPropertiesLoad(f *testing.F) {
	f.Add("recordcount=1000\nreadproportion=0.5\n")
	f.Add("# comment\n! other\nkey: value\nk v\n")
	f.Add("list=a,\\\n b\\\n")
	f.Add("=novalue\n")
	f.Fuzz(func(t *testing.T, in string) {
		p := NewProperties()
		if err := p.LoadReader(strings.NewReader(in)); err != nil {
			return
		}
		for _, k := range p.Keys() {
			require.NotEmpty(t, k)
			v, ok := p.Get(k)
			require.True(t, ok)
			require.Equal(t, strings.TrimSpace(v), v)
		}
		// Whatever parsed must also be usable as a workload or rejected
		// (sizes are bounded because zeta sums are linear in them)
		// with a typed error, never a panic.
		if cfg, err := ParseConfig(p); err != nil {
			require.ErrorIs(t, err, ErrConfig)
		} else if cfg.RecordCount < 1<<20 && cfg.FieldCount < 1<<12 && cfg.FieldLength < 1<<16 && cfg.MaxScanLength < 1<<16 {
			_, err := NewWorkload(cfg)
			if err != nil {
				require.ErrorIs(t, err, ErrConfig)
			}
		}
	})
}
