// Package records writes the records the attack probes read: N records
// of 10 fields ("field0" … "field9") of one value each.
package records

import (
	"context"
	"fmt"
	"strings"

	"github.com/hatrpc/hatrpc/internal/hatkv"
	gen "github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
)

// Spec says what Load writes: records 0 … N-1 under Key(i), each field
// a value of VSize bytes of Fill, in MultiPuts of Batch records.
type Spec struct {
	N, Batch, VSize int
	Fill            byte
	Key             func(i int) string
}

// Load writes the records of s.
func Load(ctx context.Context, kv hatkv.KV, s Spec) error {
	val := []byte(strings.Repeat(string(s.Fill), s.VSize))
	for i := 0; i < s.N; i += s.Batch {
		var b []*gen.KeyRecord
		for j := i; j < min(s.N, i+s.Batch); j++ {
			r := gen.Record{}
			for f := range 10 {
				r[fmt.Sprintf("field%d", f)] = val
			}
			b = append(b, &gen.KeyRecord{Key: s.Key(j), Record: r})
		}
		if err := kv.MultiPut(ctx, b); err != nil {
			return err
		}
	}
	return nil
}
