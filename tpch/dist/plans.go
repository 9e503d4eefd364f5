package dist

import (
	"fmt"
	"regexp"
	"strings"
)

// Fragment is SQL every worker runs on its partition; the coordinator
// loads all the workers' rows into the temporary table Table.
type Fragment struct {
	Table string
	SQL   string
	// Inputs make the fragment a shuffle's second half: each worker
	// first pulls every input's rows for it from all the workers.
	Inputs []Input
}

// Input is a table a shuffle fragment reads: SQL run once on every
// worker, its rows whose Key % N = i sent to worker i.
type Input struct {
	Table string
	SQL   string
	Key   string
}

// Plan is how the coordinator runs one statement.
type Plan struct {
	// Kind is "local" (only replicated tables: the coordinator runs it
	// alone), "shuffle" (the workers repartition rows between
	// themselves, Fragment.Inputs, then run partial results on them),
	// "partial" (workers run partial results, the coordinator
	// combines them) or "fallback" (any other statement: lineitem and
	// orders shipped whole when it names them).
	Kind      string
	Fragments []Fragment
	// Final runs at the coordinator over the fragments' tables; empty:
	// the statement itself.
	Final string
}

// Partitioned are the tables split over the workers; the coordinator
// has them empty (their schema only).
var Partitioned = []string{"lineitem", "orders"}

// normalize makes a statement comparable with the extension's query
// texts: whitespace collapsed, trailing semicolons dropped.
func normalize(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	return strings.TrimRight(q, "; ")
}

// stripOrder is q without its final ORDER BY (and LIMIT): a partial
// aggregate's order is the coordinator's business.
func stripOrder(q string) (string, error) {
	i := strings.LastIndex(q, "ORDER BY")
	if i < 0 {
		return "", fmt.Errorf("dist: no ORDER BY in %.40q", q)
	}
	return q[:i], nil
}

var mentions = regexp.MustCompile(`(?i)\b(lineitem|orders)\b`)

// fallbackPlan ships lineitem and orders whole when stmt names them and
// runs stmt at the coordinator: correct for any statement, the work all
// at the coordinator.
func fallbackPlan(stmt string) *Plan {
	p := &Plan{Kind: "fallback"}
	seen := map[string]bool{}
	for _, m := range mentions.FindAllString(stmt, -1) {
		t := strings.ToLower(m)
		if !seen[t] {
			seen[t] = true
			p.Fragments = append(p.Fragments, Fragment{Table: t, SQL: "SELECT * FROM " + t})
		}
	}
	if len(p.Fragments) == 0 {
		p.Kind = "local"
	}
	return p
}

// tpchPlans are the hand-written plans of the 22 queries (q holds the
// extension's texts, 1..22) on that many workers. Every worker holds the
// small tables whole, and lineitem and orders partitioned on orderkey,
// so joins of the two (and with the small tables) run on the workers.
func tpchPlans(q []string, workers int) (map[int]*Plan, error) {
	var err error
	strip := func(n int) string {
		s, e := stripOrder(q[n])
		if e != nil && err == nil {
			err = e
		}
		return s
	}
	partial := func(w, final string) *Plan {
		return &Plan{Kind: "partial", Fragments: []Fragment{{Table: "frag", SQL: w}}, Final: final}
	}
	plans := map[int]*Plan{
		1: partial(`SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
  sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
  sum(l_discount) AS sum_disc, count(*) AS count_order
FROM lineitem WHERE l_shipdate <= CAST('1998-09-02' AS date) GROUP BY l_returnflag, l_linestatus`,
			`SELECT l_returnflag, l_linestatus, sum(sum_qty) AS sum_qty, sum(sum_base_price) AS sum_base_price,
  sum(sum_disc_price) AS sum_disc_price, sum(sum_charge) AS sum_charge, sum(sum_qty) / sum(count_order) AS avg_qty,
  sum(sum_base_price) / sum(count_order) AS avg_price, sum(sum_disc) / sum(count_order) AS avg_disc,
  CAST(sum(count_order) AS BIGINT) AS count_order
FROM frag GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus`),
		2: {Kind: "local"},
		// Groups hold l_orderkey: each is whole on one worker, whose top 10
		// contain the global top 10's rows of that worker.
		3: partial(q[3], `SELECT * FROM frag ORDER BY revenue DESC, o_orderdate LIMIT 10`),
		4: partial(strip(4), `SELECT o_orderpriority, CAST(sum(order_count) AS BIGINT) AS order_count
FROM frag GROUP BY o_orderpriority ORDER BY o_orderpriority`),
		5: partial(strip(5), `SELECT n_name, sum(revenue) AS revenue FROM frag GROUP BY n_name ORDER BY revenue DESC`),
		6: partial(q[6], `SELECT sum(revenue) AS revenue FROM frag`),
		7: partial(strip(7), `SELECT supp_nation, cust_nation, l_year, sum(revenue) AS revenue FROM frag
GROUP BY supp_nation, cust_nation, l_year ORDER BY supp_nation, cust_nation, l_year`),
		8: partial(`SELECT o_year, sum(CASE WHEN nation = 'BRAZIL' THEN volume ELSE 0 END) AS brazil, sum(volume) AS total
FROM (`+between(q[8], "FROM (", ") AS all_nations")+`) AS all_nations GROUP BY o_year`,
			`SELECT o_year, sum(brazil) / sum(total) AS mkt_share FROM frag GROUP BY o_year ORDER BY o_year`),
		9: partial(strip(9), `SELECT nation, o_year, sum(sum_profit) AS sum_profit FROM frag GROUP BY nation, o_year
ORDER BY nation, o_year DESC`),
		10: partial(strip(10), `SELECT c_custkey, c_name, sum(revenue) AS revenue, c_acctbal, n_name, c_address, c_phone, c_comment
FROM frag GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment ORDER BY revenue DESC LIMIT 20`),
		11: {Kind: "local"},
		12: partial(strip(12), `SELECT l_shipmode, sum(high_line_count) AS high_line_count, sum(low_line_count) AS low_line_count
FROM frag GROUP BY l_shipmode ORDER BY l_shipmode`),
		// Per worker, every customer with its count of that worker's orders
		// (0 for none): the counts add up.
		13: partial(`SELECT c_custkey, count(o_orderkey) AS c_count FROM customer
LEFT OUTER JOIN orders ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%' GROUP BY c_custkey`,
			`SELECT c_count, count(*) AS custdist FROM (SELECT c_custkey, CAST(sum(c_count) AS BIGINT) AS c_count
FROM frag GROUP BY c_custkey) GROUP BY c_count ORDER BY custdist DESC, c_count DESC`),
		14: partial(`SELECT sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount) ELSE 0 END) AS promo,
  sum(l_extendedprice * (1 - l_discount)) AS total
FROM lineitem, part WHERE l_partkey = p_partkey AND l_shipdate >= date '1995-09-01' AND l_shipdate < CAST('1995-10-01' AS date)`,
			`SELECT 100.00 * sum(promo) / sum(total) AS promo_revenue FROM frag`),
		15: partial(`SELECT l_suppkey AS supplier_no, sum(l_extendedprice * (1 - l_discount)) AS total_revenue FROM lineitem
WHERE l_shipdate >= CAST('1996-01-01' AS date) AND l_shipdate < CAST('1996-04-01' AS date) GROUP BY supplier_no`,
			`WITH revenue AS (SELECT supplier_no, sum(total_revenue) AS total_revenue FROM frag GROUP BY supplier_no)
SELECT s_suppkey, s_name, s_address, s_phone, total_revenue FROM supplier, revenue
WHERE s_suppkey = supplier_no AND total_revenue = (SELECT max(total_revenue) FROM revenue) ORDER BY s_suppkey`),
		16: {Kind: "local"},
		// The correlated average needs every line of a part: the lines of
		// the parts the query can pick are repartitioned by partkey
		// between the workers, each sums its parts' small-quantity lines.
		17: {Kind: "shuffle", Fragments: []Fragment{{Table: "frag",
			Inputs: []Input{{Table: "li", Key: "l_partkey", SQL: `SELECT l_partkey, l_quantity, l_extendedprice FROM lineitem
WHERE l_partkey IN (SELECT p_partkey FROM part WHERE p_brand = 'Brand#23' AND p_container = 'MED BOX')`}},
			SQL: `SELECT sum(l_extendedprice) AS s FROM li a
WHERE l_quantity < (SELECT 0.2 * avg(l_quantity) FROM li b WHERE b.l_partkey = a.l_partkey)`}},
			Final: `SELECT sum(s) / 7.0 AS avg_yearly FROM frag`},
		// Groups hold o_orderkey, and so does the IN subquery's: both whole
		// per worker.
		18: partial(q[18], `SELECT * FROM frag ORDER BY o_totalprice DESC, o_orderdate LIMIT 100`),
		19: partial(q[19], `SELECT sum(revenue) AS revenue FROM frag`),
		// The subquery sums over (partkey, suppkey), across workers: the
		// year's lines of the 'forest' parts are repartitioned by partkey,
		// and each worker picks the suppliers of its partsupp rows.
		20: {Kind: "shuffle", Fragments: []Fragment{{Table: "frag",
			Inputs: []Input{{Table: "li", Key: "l_partkey", SQL: `SELECT l_partkey, l_suppkey, l_quantity FROM lineitem
WHERE l_shipdate >= CAST('1994-01-01' AS date) AND l_shipdate < CAST('1995-01-01' AS date)
  AND l_partkey IN (SELECT p_partkey FROM part WHERE p_name LIKE 'forest%')`}},
			SQL: `SELECT DISTINCT ps_suppkey FROM partsupp
WHERE ps_partkey IN (SELECT DISTINCT l_partkey FROM li)
  AND ps_availqty > (SELECT 0.5 * sum(l_quantity) FROM li WHERE l_partkey = ps_partkey AND l_suppkey = ps_suppkey)`}},
			Final: `SELECT s_name, s_address FROM supplier, nation
WHERE s_suppkey IN (SELECT ps_suppkey FROM frag) AND s_nationkey = n_nationkey AND n_name = 'CANADA'
ORDER BY s_name`},
		// EXISTS and NOT EXISTS look at lines of the same order: one worker.
		21: partial(strip(21), `SELECT s_name, CAST(sum(numwait) AS BIGINT) AS numwait FROM frag GROUP BY s_name
ORDER BY numwait DESC, s_name LIMIT 100`),
		// Only whether a customer has orders matters, and customer is
		// whole on every worker: each sends the candidates (the phone
		// codes, the balance above the average) without an order in its
		// partition, and a customer none of the workers saw an order of is
		// in every worker's list. Shipping every worker's DISTINCT
		// o_custkey instead (the plan before) moved 2.3 MiB at SF 1.
		22: partial(`SELECT c_custkey FROM customer
WHERE substring(c_phone FROM 1 FOR 2) IN ('13', '31', '23', '29', '30', '18', '17')
  AND c_acctbal > (SELECT avg(c_acctbal) FROM customer
    WHERE c_acctbal > 0.00 AND substring(c_phone FROM 1 FOR 2) IN ('13', '31', '23', '29', '30', '18', '17'))
  AND NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey)`,
			fmt.Sprintf(`SELECT cntrycode, count(*) AS numcust, sum(c_acctbal) AS totacctbal
FROM (SELECT substring(c_phone FROM 1 FOR 2) AS cntrycode, c_acctbal FROM customer
  WHERE c_custkey IN (SELECT c_custkey FROM frag GROUP BY c_custkey HAVING count(*) = %d)) AS custsale
GROUP BY cntrycode ORDER BY cntrycode`, workers)),
	}
	if err != nil {
		return nil, err
	}
	for n, p := range plans {
		for _, f := range p.Fragments {
			if strings.TrimSpace(f.SQL) == "" {
				return nil, fmt.Errorf("dist: Q%d: a fragment without SQL (the query texts changed?)", n)
			}
		}
	}
	return plans, nil
}

// between is the text of s between the first open and the last close
// after it ("" when absent, which tpchPlans reports).
func between(s, open, close string) string {
	i := strings.Index(s, open)
	j := strings.LastIndex(s, close)
	if i < 0 || j < i {
		return ""
	}
	return s[i+len(open) : j]
}
