// Package duck opens the embedded DuckDB database the TPC-H service runs
// on. DuckDB's tpch extension (dbgen, the 22 queries and their published
// answers) is built into the library github.com/duckdb/duckdb-go/v2
// links, so nothing is loaded or downloaded at run time.
package duck

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/duckdb/duckdb-go/v2"
)

// Open returns an in-memory DuckDB with, when sf > 0, the TPC-H tables
// generated at scale factor sf (dbgen is deterministic: the same sf gives
// the same rows).
func Open(ctx context.Context, sf float64) (*sql.DB, error) {
	c, err := duckdb.NewConnector("", nil)
	if err != nil {
		return nil, fmt.Errorf("duck: open: %w", err)
	}
	db := sql.OpenDB(c)
	if sf > 0 {
		if _, err := db.ExecContext(ctx, fmt.Sprintf("CALL dbgen(sf=%g)", sf)); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("duck: dbgen(sf=%g): %w", sf, err)
		}
	}
	return db, nil
}

// Queries returns the 22 TPC-H queries as the extension spells them,
// indexed 1..22 (index 0 is empty).
func Queries(ctx context.Context, db *sql.DB) ([]string, error) {
	return numbered(ctx, db, "SELECT query_nr, query FROM tpch_queries()")
}

// RawAnswers returns the extension's published answers at scale factor sf
// (it has 0.01, 0.1 and 1) as it prints them: a header line and a line per
// row, cells separated by '|', NULL as nothing; indexed 1..22.
func RawAnswers(ctx context.Context, db *sql.DB, sf float64) ([]string, error) {
	return numbered(ctx, db, "SELECT query_nr, answer FROM tpch_answers() WHERE scale_factor = ?", sf)
}

func numbered(ctx context.Context, db *sql.DB, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("duck: %w", err)
	}
	defer rows.Close()
	out := make([]string, 23)
	n := 0
	for rows.Next() {
		var nr int
		var s string
		if err := rows.Scan(&nr, &s); err != nil {
			return nil, err
		}
		if nr < 1 || nr > 22 || out[nr] != "" {
			return nil, fmt.Errorf("duck: %q: query number %d out of range or twice", query, nr)
		}
		out[nr] = s
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if n != 22 {
		return nil, fmt.Errorf("duck: %q gave %d of the 22 queries (the answers exist for sf 0.01, 0.1 and 1)", query, n)
	}
	return out, nil
}
