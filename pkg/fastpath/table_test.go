//go:build cgo && linux

package fastpath

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// TestEngineProtocolTable: every concrete hint protocol maps to the engine
// protocol of the same name, each engine protocol is reached once, and
// auto (or anything out of range) is hybrid.
func TestEngineProtocolTable(t *testing.T) {
	seen := map[rdma.Protocol]bool{}
	for p := hints.ProtoEager; p <= hints.ProtoHybrid; p++ {
		e := EngineProtocol(p)
		require.Equal(t, p.String(), e.String(), "hint %v", p)
		require.False(t, seen[e], "engine protocol %v reached twice", e)
		seen[e] = true
	}
	require.Len(t, seen, rdma.NumProtocols)
	require.Equal(t, rdma.ProtoHybrid, EngineProtocol(hints.ProtoAuto))
	require.Equal(t, rdma.ProtoHybrid, EngineProtocol(hints.Protocol(99)))
	require.Equal(t, rdma.ProtoHybrid, EngineProtocol(hints.Protocol(-1)))
}
