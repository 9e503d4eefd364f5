package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/cluster/internal/testsvc/gen/store"
)

// A static list of unix socket addresses (a file and an abstract name)
// is served like host:port ones: calls reach both servers.
func TestStaticUnixSockets(t *testing.T) {
	ha, hb := newStoreHandler(), newStoreHandler()
	a := startServerAt(t, ha, "unix:"+filepath.Join(t.TempDir(), "a.sock"))
	b := startServerAt(t, hb, fmt.Sprintf("unix:@hatrpc-cluster-%d-%d", os.Getpid(), time.Now().UnixNano()))
	cl := dialCluster(t, []string{a.addr, b.addr}, fastOptions()...)
	kv := store.NewStoreClient(cl)
	for range 10 {
		_, err := kv.Get(tctx(t, 5*time.Second), "k")
		require.NoError(t, err)
	}
	require.Equal(t, int64(5), ha.gets.Load())
	require.Equal(t, int64(5), hb.gets.Load())
}
