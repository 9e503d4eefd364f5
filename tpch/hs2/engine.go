package hs2

import (
	"context"
	"database/sql"
)

// Cursor is an open result a statement's rows are read from, page by
// page; *sql.Rows is one.
type Cursor interface {
	ColumnTypes() ([]*sql.ColumnType, error)
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Engine runs a client's statement. Query returns once the result is
// open; cancelling ctx stops the statement, also while its cursor is read.
type Engine interface {
	Query(ctx context.Context, query string, args ...any) (Cursor, error)
}

// DB is the Engine of one database/sql database: the statement runs whole
// on it.
type DB struct{ DB *sql.DB }

// Query runs query on the database.
func (d DB) Query(ctx context.Context, query string, args ...any) (Cursor, error) {
	rows, err := d.DB.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}
