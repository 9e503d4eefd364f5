package hatkv

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// BenchmarkGetReply is the server's part of a Get of a YCSB record (10
// fields of 100 B) without the transport: the store read plus the reply's
// encoding, as the generated handler did it (decode into a Record map,
// encode the map: "decoded") and as the wire-form service does it (copy
// the stored bytes: "wire"), in the binary and compact protocols.
func BenchmarkGetReply(b *testing.B) {
	ctx := context.Background()
	st, err := kvstore.Open(ctx, b.TempDir(), kvstore.WithSync(kvstore.SyncNoSync), kvstore.WithMapSize(64<<20))
	require.NoError(b, err)
	defer st.Close()
	const n = 1000
	for i := 0; i < n; i++ {
		rec := kvstore.Record{}
		for f := 0; f < 10; f++ {
			rec[fmt.Sprintf("field%d", f)] = bytes.Repeat([]byte{byte('a' + f)}, 100)
		}
		require.NoError(b, st.Insert(ctx, fmt.Sprintf("user%06d", i), rec))
	}
	svc := NewService(st)
	paths := map[string]func(key string) (proto.Struct, error){
		"decoded": func(key string) (proto.Struct, error) {
			r, err := svc.Get(ctx, key, nil)
			res := hatkv.NewHatKVGetResult()
			res.Success = r
			return res, err
		},
		"wire": func(key string) (proto.Struct, error) {
			rec, err := st.GetWire(ctx, key, nil, nil)
			return &wireResult{kind: wireGet, rec: rec}, err
		},
	}
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		for _, name := range []string{"decoded", "wire"} {
			get := paths[name]
			b.Run(p.String()+"/"+name, func(b *testing.B) {
				bw, cw := proto.NewBinaryWriter(nil), proto.NewCompactWriter(nil)
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					res, err := get(fmt.Sprintf("user%06d", i%n))
					if err != nil {
						b.Fatal(err)
					}
					if p == proto.Compact {
						cw.Reset(cw.Bytes()[:0])
						err = res.EncodeCompact(cw)
					} else {
						bw.Reset(bw.Bytes()[:0])
						err = res.EncodeBinary(bw)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
