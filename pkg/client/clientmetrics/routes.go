package clientmetrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hatrpc/hatrpc/pkg/client"
)

// Routes returns a collector of what one Conn sent, read from the Conn at
// scrape time (client.Conn.RouteStats and LaneStats):
//
//	hatrpc_client_route_calls_total{route}                          calls by route: tcp, lane, flock
//	hatrpc_client_engine_messages_total{service,function,protocol}  messages its lanes sent, by the
//	                                                                 protocol the engine actually used
//
// The route of a call and the engine protocol are decided below the
// interceptors, which is why these come from the Conn rather than from
// Interceptor. labels are set on every series (the server's address, say),
// so that the collectors of several Conns can share a registry;
// unregister a Conn's collector when it is closed.
func Routes(c *client.Conn, labels prometheus.Labels) prometheus.Collector {
	return &routes{c: c,
		calls: prometheus.NewDesc("hatrpc_client_route_calls_total",
			"Calls sent, by route: tcp (the Conn's TCP connections), lane (lanes of their function), flock (the process's FLOCK handle).",
			[]string{"route"}, labels),
		engine: prometheus.NewDesc("hatrpc_client_engine_messages_total",
			"Messages the lanes sent, by the protocol the engine actually used: hybrid as eager or write_rndv, a message too large for its protocol's buffer as write_rndv.",
			[]string{"service", "function", "protocol"}, labels),
	}
}

type routes struct {
	c             *client.Conn
	calls, engine *prometheus.Desc
}

func (r *routes) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.calls
	ch <- r.engine
}

func (r *routes) Collect(ch chan<- prometheus.Metric) {
	st := r.c.RouteStats()
	for route, n := range map[string]uint64{"tcp": st.TCP, "lane": st.Lane, "flock": st.FLOCK} {
		ch <- prometheus.MustNewConstMetric(r.calls, prometheus.CounterValue, float64(n), route)
	}
	for _, ls := range r.c.LaneStats() {
		svc, fn, ok := strings.Cut(ls.Function, ":")
		if !ok {
			svc, fn = "", ls.Function
		}
		for proto, n := range ls.Sent {
			ch <- prometheus.MustNewConstMetric(r.engine, prometheus.CounterValue, float64(n), svc, fn, proto)
		}
	}
}
