package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/hatrpc/hatrpc/tpch/duck"
)

// Answers returns the published answers to the 22 queries at scale factor
// sf that DuckDB's tpch extension carries (sf 0.01, 0.1 and 1), indexed
// 1..22.
func Answers(ctx context.Context, db *sql.DB, sf float64) ([]*Result, error) {
	raw, err := duck.RawAnswers(ctx, db, sf)
	if err != nil {
		return nil, err
	}
	out := make([]*Result, len(raw))
	for i := 1; i < len(raw); i++ {
		out[i] = parseAnswer(raw[i])
	}
	return out, nil
}

// parseAnswer reads the extension's answer format: a header line and one
// line per row, each ended by a newline, cells separated by '|', NULL
// printed as nothing.
func parseAnswer(a string) *Result {
	lines := strings.Split(strings.TrimSuffix(a, "\n"), "\n")
	r := &Result{Columns: strings.Split(lines[0], "|")}
	for _, l := range lines[1:] {
		r.Rows = append(r.Rows, strings.Split(l, "|"))
	}
	return r
}

// Compare says where got differs from want: the number of columns or of
// rows, or the first cell that differs. Column names are not compared:
// the published answers name some columns as older DuckDB versions did
// ("sum" for sum(l_quantity)). Numbers are equal within a
// relative 1e-9 (the answers print averages with all their digits, the
// wire carries decimals as text and doubles as doubles).
func Compare(got, want *Result) error {
	if len(got.Columns) != len(want.Columns) {
		return fmt.Errorf("%d columns %v, want %d %v", len(got.Columns), got.Columns, len(want.Columns), want.Columns)
	}
	if len(got.Rows) != len(want.Rows) {
		return fmt.Errorf("%d rows, want %d", len(got.Rows), len(want.Rows))
	}
	for r := range want.Rows {
		if len(got.Rows[r]) != len(want.Rows[r]) {
			return fmt.Errorf("row %d has %d cells, want %d", r, len(got.Rows[r]), len(want.Rows[r]))
		}
		for c := range want.Rows[r] {
			if !sameCell(got.Rows[r][c], want.Rows[r][c]) {
				return fmt.Errorf("row %d column %s is %q, want %q", r, want.Columns[c], got.Rows[r][c], want.Rows[r][c])
			}
		}
	}
	return nil
}

func sameCell(got, want string) bool {
	got, want = strings.TrimSpace(got), strings.TrimSpace(want)
	if got == want || (got == "NULL" && want == "") {
		return true
	}
	g, err1 := strconv.ParseFloat(got, 64)
	w, err2 := strconv.ParseFloat(want, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	return math.Abs(g-w) <= 1e-9*math.Max(1, math.Abs(w))
}

// Reference is what a client in another language needs to check itself:
// the 22 queries and their published answers as the extension prints
// them (indexed 1..22).
type Reference struct {
	SF      float64  `json:"sf"`
	Queries []string `json:"queries"`
	Answers []string `json:"answers"`
}

// WriteReference writes db's Reference at scale factor sf as JSON.
func WriteReference(ctx context.Context, w io.Writer, db *sql.DB, sf float64) error {
	qs, err := duck.Queries(ctx, db)
	if err != nil {
		return err
	}
	as, err := duck.RawAnswers(ctx, db, sf)
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(Reference{SF: sf, Queries: qs, Answers: as})
}
