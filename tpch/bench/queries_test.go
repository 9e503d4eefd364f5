package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

// TestQueriesEveryConfig runs the 22 queries through each configuration's
// server and client (Apache Thrift Go's client for vanilla; HatRPC's over
// TCP and over lanes for the hinted ones) and checks every answer against
// the published one.
func TestQueriesEveryConfig(t *testing.T) {
	cases := []struct {
		cfg  hs2.Config
		rdma string
	}{
		{hs2.Vanilla, "off"},
		{hs2.Service, "off"},
		{hs2.Function, "off"},
		{hs2.Service, fastpathtest.Provider()},
		{hs2.Function, fastpathtest.Provider()},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%s", tc.cfg, tc.rdma), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
			defer cancel()
			srv, err := Serve(testDB, "127.0.0.1:0", tc.cfg, tc.rdma)
			require.NoError(t, err)
			defer func() { assert.NoError(t, srv.Shutdown(ctx)) }()
			var s Session
			if tc.cfg == hs2.Vanilla {
				s, err = OpenApache(ctx, srv.Addr, hangMinute)
			} else {
				s, err = OpenHatRPC(ctx, srv.Addr, tc.cfg, tc.rdma)
			}
			require.NoError(t, err)
			defer func() { assert.NoError(t, s.Close(ctx)) }()
			for q := 1; q <= 22; q++ {
				got, err := s.Query(ctx, testQueries[q])
				require.NoError(t, err, "Q%d", q)
				require.NoError(t, Compare(got, testAnswers[q]), "Q%d", q)
				require.Equal(t, directColumns(t, ctx, testQueries[q]), got.Columns, "Q%d", q)
			}
			if tc.rdma != "off" {
				requireLanes(t, s, "TCLIService:FetchResults")
			}
		})
	}
}

// requireLanes checks that fn's calls went over lanes.
func requireLanes(t *testing.T, s Session, fn string) {
	t.Helper()
	ls, ok := s.(interface{ Lanes() []client.LaneStats })
	require.True(t, ok, "%T reports no lanes", s)
	for _, st := range ls.Lanes() {
		if st.Function == fn {
			var n uint64
			for _, c := range st.Requests {
				n += c
			}
			require.Positive(t, n, "%s: no request over lanes: %+v", fn, st)
			return
		}
	}
	require.Failf(t, "no lanes", "%s used no lane: %+v", fn, ls.Lanes())
}

// directColumns is the column names of query run on DuckDB in process.
func directColumns(t *testing.T, ctx context.Context, query string) []string {
	t.Helper()
	rows, err := testDB.QueryContext(ctx, query)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	return cols
}
