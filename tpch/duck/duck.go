// Package duck opens the embedded DuckDB database the TPC-H service runs
// on, with DuckDB's tpch extension loaded from a file installed at setup
// time (PyPI's duckdb-extension-tpch, by `make -C tpch deps`): nothing is
// downloaded at run time.
package duck

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
)

// ErrNoExtension is returned by FindExtension when no tpch extension file
// is installed.
var ErrNoExtension = errors.New("duck: tpch extension not found (run `make -C tpch deps`, or set TPCH_EXTENSION)")

// extGlob is where pip puts the extension inside a virtual environment.
const extGlob = "lib/python3*/site-packages/duckdb_extension_tpch/extensions/v*/tpch.duckdb_extension"

// FindExtension returns the tpch extension file: $TPCH_EXTENSION if set,
// else the one in the .venv of the first of dirs (or their parents) that
// has one.
func FindExtension(dirs ...string) (string, error) {
	if p := os.Getenv("TPCH_EXTENSION"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("duck: TPCH_EXTENSION: %w", err)
		}
		return p, nil
	}
	for _, d := range dirs {
		d, err := filepath.Abs(d)
		if err != nil {
			return "", err
		}
		for {
			m, _ := filepath.Glob(filepath.Join(d, ".venv", extGlob))
			if len(m) > 0 {
				sort.Strings(m)
				return m[len(m)-1], nil
			}
			up := filepath.Dir(d)
			if up == d {
				break
			}
			d = up
		}
	}
	return "", ErrNoExtension
}

// Open returns an in-memory DuckDB with the tpch extension at ext loaded
// and, when sf > 0, the TPC-H tables generated at scale factor sf (dbgen
// is deterministic: the same sf gives the same rows).
func Open(ctx context.Context, ext string, sf float64) (*sql.DB, error) {
	c, err := duckdb.NewConnector("", nil)
	if err != nil {
		return nil, fmt.Errorf("duck: open: %w", err)
	}
	db := sql.OpenDB(c)
	if _, err := db.ExecContext(ctx, "LOAD '"+strings.ReplaceAll(ext, "'", "''")+"'"); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("duck: loading %s: %w", ext, err)
	}
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
	rows, err := db.QueryContext(ctx, "SELECT query_nr, query FROM tpch_queries() ORDER BY query_nr")
	if err != nil {
		return nil, fmt.Errorf("duck: tpch_queries: %w", err)
	}
	defer rows.Close()
	qs := make([]string, 23)
	for rows.Next() {
		var n int
		var q string
		if err := rows.Scan(&n, &q); err != nil {
			return nil, err
		}
		if n < 1 || n > 22 {
			return nil, fmt.Errorf("duck: tpch_queries: query number %d", n)
		}
		qs[n] = q
	}
	return qs, rows.Err()
}
