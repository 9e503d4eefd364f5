package bench

import (
	"encoding/json"
	"io"
	"time"
)

// Report is WriteJSON's document.
type Report struct {
	Setups  []SetupReport `json:"setups"`
	Queries []QueryReport `json:"queries"`
}

// SetupReport is a setup's totals over the queries run.
type SetupReport struct {
	Config        string `json:"config"`
	Transport     string `json:"transport"`
	TotalMedianUS int64  `json:"total_median_us"` // the table's "total (medians)"
	TotalBestUS   int64  `json:"total_best_us"`
}

// QueryReport is a query on a setup: what the CSV's line carries.
type QueryReport struct {
	Config      string  `json:"config"`
	Transport   string  `json:"transport"`
	Query       int     `json:"query"`
	Rows        int     `json:"rows"`
	SocketBytes int64   `json:"socket_bytes"` // -1 over lanes
	BestUS      int64   `json:"best_us"`
	MedianUS    int64   `json:"median_us"`
	RunsUS      []int64 `json:"runs_us"`
	// Exchange is there when the query ran on workers.
	Exchange *ExchangeReport `json:"exchange,omitempty"`
}

// ExchangeReport is a query's traffic between the processes.
type ExchangeReport struct {
	Workers       int     `json:"workers"`
	Bytes         int64   `json:"bytes"`
	ShuffledBytes int64   `json:"shuffled_bytes"`
	Share         float64 `json:"share"` // of the timed runs' time
}

// WriteJSON writes the timings as one JSON document (Report): each
// setup's totals over queries, then one record per query and setup.
func WriteJSON(w io.Writer, ts []Timing, setups []Setup, queries []int) error {
	med, best := totals(ts, setups, queries, Timing.Median), totals(ts, setups, queries, Timing.Best)
	rep := Report{Setups: make([]SetupReport, len(setups)), Queries: make([]QueryReport, 0, len(ts))}
	for i, su := range setups {
		rep.Setups[i] = SetupReport{Config: su.Config.String(), Transport: su.Transport,
			TotalMedianUS: med[i].Microseconds(), TotalBestUS: best[i].Microseconds()}
	}
	for _, t := range ts {
		q := QueryReport{Config: t.Setup.Config.String(), Transport: t.Setup.Transport, Query: t.Query, Rows: t.Rows,
			SocketBytes: t.SocketBytes, BestUS: t.Best().Microseconds(), MedianUS: t.Median().Microseconds(),
			RunsUS: make([]int64, len(t.Runs))}
		for i, r := range t.Runs {
			q.RunsUS[i] = r.Microseconds()
		}
		if t.Workers > 0 {
			q.Exchange = &ExchangeReport{Workers: t.Workers, Bytes: t.ExchangeBytes, ShuffledBytes: t.ShuffledBytes, Share: t.ExchangeShare}
		}
		rep.Queries = append(rep.Queries, q)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// totals sums pick over queries for each setup (WriteTable's and
// WriteJSON's totals).
func totals(ts []Timing, setups []Setup, queries []int, pick func(Timing) time.Duration) []time.Duration {
	byKey := map[Setup]map[int]Timing{}
	for _, t := range ts {
		if byKey[t.Setup] == nil {
			byKey[t.Setup] = map[int]Timing{}
		}
		byKey[t.Setup][t.Query] = t
	}
	out := make([]time.Duration, len(setups))
	for i, su := range setups {
		for _, q := range queries {
			if t, ok := byKey[su][q]; ok {
				out[i] += pick(t)
			}
		}
	}
	return out
}
