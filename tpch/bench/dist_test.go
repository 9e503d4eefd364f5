package bench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/beltran/gohive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/tpch/dist"
	"github.com/hatrpc/hatrpc/tpch/duck"
	"github.com/hatrpc/hatrpc/tpch/hs2"
)

// The worker processes are this test binary (TestMain runs `worker`
// as cmd/tpch does): nothing to build, which the Soft-RoCE guest
// (test/rxe/suite.sh) could do only slowly under emulation, and under
// -race the workers' Go code is watched too.
func tpchBinary(t *testing.T) string {
	t.Helper()
	bin, err := os.Executable()
	require.NoError(t, err)
	return bin
}

// The distributed tests share three worker processes serving every
// configuration (with lanes) and the coordinator's DuckDB (lineitem and
// orders empty); TestMain stops them. A test that kills a worker starts
// it again before it ends.
var (
	clusterOnce sync.Once
	cluster     *dist.Cluster
	coordDB     *sql.DB
	clusterErr  error
)

func sharedCluster(t *testing.T) (*dist.Cluster, *sql.DB) {
	t.Helper()
	bin := tpchBinary(t)
	clusterOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
		defer cancel()
		cluster, clusterErr = dist.StartCluster(ctx, bin, 3, testSF,
			[]dist.Config{dist.Vanilla, dist.Service, dist.Function}, fastpathtest.Provider(), os.Stderr)
		if clusterErr != nil {
			return
		}
		if coordDB, clusterErr = duck.Open(ctx, testSF); clusterErr == nil {
			clusterErr = dist.PrepareCoordinator(ctx, coordDB)
		}
	})
	require.NoError(t, clusterErr)
	return cluster, coordDB
}

// stopCluster is TestMain's.
func stopCluster() error {
	if cluster != nil {
		cluster.Close()
	}
	if coordDB != nil {
		return coordDB.Close()
	}
	return nil
}

// TestDistributedQueries runs the 22 queries through the HiveServer2
// front end on a coordinator and three worker processes, for each
// configuration of both hops over TCP and function hints over lanes,
// each answer equal to the published one (the single-process run's) with
// DuckDB's column names; over lanes the chunks went over them.
func TestDistributedQueries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Minute))
	defer cancel()
	prov := fastpathtest.Provider()
	cl, db := sharedCluster(t)
	for _, su := range []Setup{{hs2.Vanilla, "tcp"}, {hs2.Service, "tcp"}, {hs2.Function, "tcp"}, {hs2.Function, prov}} {
		t.Run(su.String(), func(t *testing.T) {
			dc := dist.Config(su.Config)
			coord, err := dist.NewCoordinator(ctx, db, cl.Addrs(dc), dc, su.rdma())
			require.NoError(t, err)
			defer func() { assert.NoError(t, coord.Close()) }()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			srv := ServeWith(db, ln, su.Config, su.rdma(), []hs2.Option{hs2.WithEngine(coord)})
			defer func() { assert.NoError(t, srv.Shutdown(ctx)) }()
			var s Session
			if su.Config == hs2.Vanilla {
				s, err = OpenApache(ctx, srv.Addr, hangMinute)
			} else {
				s, err = OpenHatRPC(ctx, srv.Addr, su.Config, su.rdma())
			}
			require.NoError(t, err)
			defer func() { assert.NoError(t, s.Close(ctx)) }()
			for q := 1; q <= 22; q++ {
				before := coord.Stats()
				got, err := s.Query(ctx, testQueries[q])
				require.NoError(t, err, "Q%d", q)
				require.NoError(t, Compare(got, testAnswers[q]), "Q%d", q)
				require.Equal(t, directColumns(t, ctx, testQueries[q]), got.Columns, "Q%d", q)
				after := coord.Stats()
				if coord.PlanFor(testQueries[q]).Kind == "local" {
					assert.Equal(t, before.Fragments, after.Fragments, "Q%d runs at the coordinator alone", q)
				} else {
					assert.Equal(t, before.Fragments+3, after.Fragments, "Q%d: one fragment per worker", q)
					assert.GreaterOrEqual(t, after.Chunks-before.Chunks, int64(3), "Q%d", q)
				}
				switch q {
				case 17: // no part qualifies at SF 0.01: nothing to move (dist's TestShuffle widens it)
					assert.Equal(t, "shuffle", coord.PlanFor(testQueries[q]).Kind)
				case 20:
					assert.Equal(t, "shuffle", coord.PlanFor(testQueries[q]).Kind)
					assert.Positive(t, after.Shuffled-before.Shuffled, "Q%d: the workers repartitioned rows between them", q)
				default:
					assert.Equal(t, before.Shuffled, after.Shuffled, "Q%d", q)
				}
			}
			if su.Transport != "tcp" {
				requireExchangeLanes(t, coord)
			}
		})
	}
}

func requireExchangeLanes(t *testing.T, coord *dist.Coordinator) {
	t.Helper()
	var n uint64
	for _, st := range coord.Lanes() {
		if st.Function == "Exchange:FetchChunk" {
			for _, c := range st.Requests {
				n += c
			}
		}
	}
	require.Positive(t, n, "no FetchChunk over lanes: %+v", coord.Lanes())
}

// TestDistributedBench runs the bench with workers as `tpch bench
// --workers 3` does and checks the exchange's columns.
func TestDistributedBench(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	cl, db := sharedCluster(t)
	setups := []Setup{{hs2.Function, "tcp"}}
	ts, err := Run(ctx, db, testQueries, setups, Options{
		Queries: []int{2, 10, 20}, Reps: 1, Answers: testAnswers, Timeout: hangMinute, Cluster: cl,
	})
	require.NoError(t, err)
	require.Len(t, ts, 3)
	assert.Equal(t, 3, ts[0].Workers)
	assert.Zero(t, ts[0].ExchangeBytes, "Q2 uses the replicated tables only")
	assert.Greater(t, ts[1].ExchangeBytes, int64(1000), "Q10 ships partial sums per customer")
	assert.Zero(t, ts[1].ShuffledBytes, "Q10 shuffles nothing")
	assert.Greater(t, ts[1].ExchangeShare, 0.0)
	assert.LessOrEqual(t, ts[1].ExchangeShare, 1.0)
	assert.Positive(t, ts[2].ShuffledBytes, "Q20 repartitions lines between the workers")
	assert.Greater(t, ts[2].ExchangeBytes, ts[2].ShuffledBytes, "Q20's partial results reach the coordinator too")
	var csv, table bytes.Buffer
	require.NoError(t, WriteCSV(&csv, ts))
	assert.Contains(t, csv.String(), "config,transport,query,rows,socket_bytes,best_us,median_us,runs_us,workers,exchange_bytes,shuffled_bytes,exchange_share\n")
	require.NoError(t, WriteTable(&table, ts, setups, []int{2, 10, 20}))
	assert.Contains(t, table.String(), "shuf KB")
	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, ts, setups, []int{2, 10, 20}))
	var rep Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &rep))
	require.Len(t, rep.Queries, 3)
	assert.Equal(t, &ExchangeReport{Workers: 3, Bytes: ts[2].ExchangeBytes, ShuffledBytes: ts[2].ShuffledBytes, Share: ts[2].ExchangeShare},
		rep.Queries[2].Exchange)
}

// slowPlan is a fragment that would run for hours on every worker.
var slowPlan = &dist.Plan{Kind: "partial", Fragments: []dist.Fragment{{Table: "frag",
	SQL: "SELECT count(*) AS n FROM range(1000000000000) t(x) WHERE x % 7 = 3"}}, Final: "SELECT n FROM frag"}

// waitOpened waits until the coordinator has sent the fragment to every
// worker.
func waitOpened(t *testing.T, ctx context.Context, coord *dist.Coordinator, want int64) {
	t.Helper()
	for coord.Stats().Fragments < want {
		require.NoError(t, ctx.Err())
		time.Sleep(10 * time.Millisecond)
	}
}

// waitIdle waits until worker i has no fragment open.
func waitIdle(t *testing.T, ctx context.Context, coord *dist.Coordinator, i int) {
	t.Helper()
	for {
		info, err := coord.WorkerInfo(ctx, i)
		require.NoError(t, err)
		if info.OpenFragments == 0 {
			return
		}
		require.NoError(t, ctx.Err(), "worker %d keeps %d fragments open", i, info.OpenFragments)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWorkerKilled: a worker killed while the query runs fails the query
// with an error naming it (well before the query could end), the other
// workers' parts are cancelled, the coordinator answers what needs no
// worker, and the restarted worker serves the next query. With Apache
// Thrift's client and HatRPC's, over TCP and over lanes.
func TestWorkerKilled(t *testing.T) {
	for _, tc := range []struct {
		cfg  dist.Config
		rdma string
	}{{dist.Vanilla, "off"}, {dist.Function, "off"}, {dist.Function, fastpathtest.Provider()}} {
		cfg := tc.cfg
		t.Run(cfg.String()+"/"+tc.rdma, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
			defer cancel()
			cl, db := sharedCluster(t)
			coord, err := dist.NewCoordinator(ctx, db, cl.Addrs(cfg), cfg, tc.rdma)
			require.NoError(t, err)
			defer func() { assert.NoError(t, coord.Close()) }()
			requireQuery(t, ctx, coord, 6)

			errc := make(chan error, 1)
			base := coord.Stats().Fragments
			go func() {
				cur, err := coord.QueryPlan(ctx, slowPlan, "slow")
				if err == nil {
					err = cur.Close()
					if err == nil {
						err = errors.New("the slow query succeeded")
					}
				}
				errc <- err
			}()
			waitOpened(t, ctx, coord, base+3)
			cl.Kill(1)
			var qerr error
			select {
			case qerr = <-errc:
			case <-ctx.Done():
				t.Fatal("the query did not fail after its worker was killed")
			}
			var we *dist.WorkerError
			require.ErrorAs(t, qerr, &we)
			assert.Equal(t, 1, we.Index)
			assert.Contains(t, qerr.Error(), "dist: worker 1 (")
			waitIdle(t, ctx, coord, 0)
			waitIdle(t, ctx, coord, 2)

			_, err = coord.Query(ctx, testQueries[6])
			require.ErrorAs(t, err, &we, "worker 1 is down")
			assert.Equal(t, 1, we.Index)
			requireQuery(t, ctx, coord, 2) // the replicated tables only

			require.NoError(t, cl.Restart(ctx, 1))
			requireQuery(t, ctx, coord, 6)
			requireQuery(t, ctx, coord, 18)
		})
	}
}

// TestCancelStopsWorkers: cancelling a query (as CancelOperation does)
// ends it and its fragments on every worker.
func TestCancelStopsWorkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Minute))
	defer cancel()
	cl, db := sharedCluster(t)
	coord, err := dist.NewCoordinator(ctx, db, cl.Addrs(dist.Function), dist.Function, "off")
	require.NoError(t, err)
	defer func() { assert.NoError(t, coord.Close()) }()

	qctx, qcancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		cur, err := coord.QueryPlan(qctx, slowPlan, "slow")
		if err == nil {
			_ = cur.Close()
			err = errors.New("the slow query succeeded")
		}
		errc <- err
	}()
	waitOpened(t, ctx, coord, 3)
	qcancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-ctx.Done():
		t.Fatal("the cancelled query did not end")
	}
	for i := range 3 {
		waitIdle(t, ctx, coord, i)
	}
	requireQuery(t, ctx, coord, 1)
}

// requireQuery runs TPC-H query q on coord and checks its answer.
func requireQuery(t *testing.T, ctx context.Context, coord *dist.Coordinator, q int) {
	t.Helper()
	cur, err := coord.Query(ctx, testQueries[q])
	require.NoError(t, err, "Q%d", q)
	defer func() { require.NoError(t, cur.Close()) }()
	got, err := readCursor(cur)
	require.NoError(t, err, "Q%d", q)
	require.NoError(t, Compare(got, testAnswers[q]), "Q%d", q)
}

// readCursor reads a cursor's rows as text, as the clients print them.
func readCursor(cur hs2.Cursor) (*Result, error) {
	cts, err := cur.ColumnTypes()
	if err != nil {
		return nil, err
	}
	res := &Result{}
	for _, ct := range cts {
		res.Columns = append(res.Columns, ct.Name())
	}
	vals := make([]any, len(cts))
	ptrs := make([]any, len(cts))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for cur.Next() {
		if err := cur.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			switch x := v.(type) {
			case nil:
				row[i] = "NULL"
			case time.Time:
				row[i] = x.Format(time.DateOnly)
			case fmt.Stringer:
				row[i] = x.String()
			default:
				row[i] = fmt.Sprint(x)
			}
		}
		res.Rows = append(res.Rows, row)
	}
	return res, cur.Err()
}

// TestDistributedClients: impyla and PyHive (clients/hs2_check.py) and
// gohive run the 22 queries against the HiveServer2 front end of a
// coordinator with three worker processes, every answer checked; the
// exchange behind it rides the provider's lanes (ibv in the Soft-RoCE
// guest).
func TestDistributedClients(t *testing.T) {
	_, err := os.Stat(venvPython)
	require.NoError(t, err, "run `make -C tpch deps` first")
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(8*time.Minute))
	defer cancel()
	cl, db := sharedCluster(t)
	ref := filepath.Join(t.TempDir(), "reference.json")
	f, err := os.Create(ref)
	require.NoError(t, err)
	require.NoError(t, WriteReference(ctx, f, testDB, testSF))
	require.NoError(t, f.Close())

	coord, err := dist.NewCoordinator(ctx, db, cl.Addrs(dist.Function), dist.Function, fastpathtest.Provider())
	require.NoError(t, err)
	defer func() { assert.NoError(t, coord.Close()) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := ServeWith(db, ln, hs2.Function, "off", []hs2.Option{hs2.WithEngine(coord)})
	defer func() { assert.NoError(t, srv.Shutdown(ctx)) }()
	host, port := hostPort(t, srv.Addr)

	for _, c := range []string{"impyla", "pyhive"} {
		t.Run(c, func(t *testing.T) {
			runCheck(t, ctx, "23 passed, 0 failed", "--client", c, "--port", strconv.Itoa(port), "--reference", ref)
		})
	}
	t.Run("gohive", func(t *testing.T) {
		cfg := gohive.NewConnectConfiguration()
		cfg.ConnectTimeout, cfg.SocketTimeout = hangMinute, hangMinute
		conn, err := gohive.Connect(host, port, "NOSASL", cfg)
		require.NoError(t, err)
		defer func() { assert.NoError(t, conn.Close()) }()
		cur := conn.Cursor()
		defer cur.Close()
		for q := 1; q <= 22; q++ {
			require.NoError(t, Compare(gohiveQuery(t, ctx, cur, testQueries[q]), testAnswers[q]), "Q%d", q)
		}
	})
	assert.Positive(t, coord.Stats().Fragments)
	requireExchangeLanes(t, coord)
}
