package hatkv

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
)

// storeCollector exports the store's statistics next to the RPC metrics.
// It reads Stats once per scrape, so the values of one scrape agree.
type storeCollector struct {
	stats func(ctx context.Context) (kvstore.Stats, error)

	records, mapSize, used, readers, maxReaders *prometheus.Desc
	ops, commits, batched, growths              *prometheus.Desc
}

func newStoreCollector(stats func(ctx context.Context) (kvstore.Stats, error)) *storeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("hatkv_store_"+name, help, labels, nil)
	}
	return &storeCollector{
		stats:      stats,
		records:    d("records", "Records in the store."),
		mapSize:    d("map_size_bytes", "LMDB map size (the store's capacity)."),
		used:       d("used_bytes", "Bytes of the map in use."),
		readers:    d("readers", "LMDB reader slots in use."),
		maxReaders: d("max_readers", "LMDB reader slots (from the concurrency hint)."),
		ops:        d("operations_total", "Store operations by kind.", "op"),
		commits:    d("commits_total", "Write transactions committed."),
		batched:    d("batched_writes_total", "Writes carried by those transactions (group commit)."),
		growths:    d("map_growths_total", "Map size increases made to let deletes proceed on a full map."),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.records, c.mapSize, c.used, c.readers, c.maxReaders, c.ops, c.commits, c.batched, c.growths} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.stats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.records, err)
		return
	}
	g := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	cnt := func(d *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	g(c.records, float64(st.Records))
	g(c.mapSize, float64(st.MapSize))
	g(c.used, float64(st.UsedBytes))
	g(c.readers, float64(st.NumReaders))
	g(c.maxReaders, float64(st.MaxReaders))
	cnt(c.ops, st.Gets, "get")
	cnt(c.ops, st.Puts, "put")
	cnt(c.ops, st.Deletes, "delete")
	cnt(c.ops, st.Scans, "scan")
	cnt(c.commits, st.Commits)
	cnt(c.batched, st.BatchedWrites)
	cnt(c.growths, st.MapGrowths)
}
