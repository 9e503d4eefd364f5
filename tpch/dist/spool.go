package dist

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// A spool is a shuffle input as one worker serves it: the input's SQL run
// once per query (tag) into a table of the worker's database, from which
// each of the N receivers' requests reads its share. Without it every
// receiver's request would scan the worker's data again (N scans of
// lineitem per worker instead of one).
type spool struct {
	key     string
	table   string
	tag     string
	ready   chan struct{} // closed once the table exists or err is set
	err     error
	left    int // receivers' requests not yet done with it
	created time.Time
}

// spoolFor returns the table holding sqlText's rows for tag, running the
// query if this is the first request; the caller releases it once.
func (w *Worker) spoolFor(ctx context.Context, tag, sqlText string) (*spool, error) {
	key := tag + "\x00" + sqlText
	w.mu.Lock()
	s := w.spools[key]
	first := s == nil
	if first {
		s = &spool{key: key, table: fmt.Sprintf("tpch_spool_%d", w.next.Add(1)), tag: tag,
			ready: make(chan struct{}), left: w.count, created: time.Now()}
		w.spools[key] = s
	}
	w.mu.Unlock()
	if first {
		_, s.err = w.db.ExecContext(ctx, "CREATE TABLE "+quote(s.table)+" AS "+sqlText)
		close(s.ready)
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		w.releaseSpool(s)
		return nil, ctx.Err()
	}
	if s.err != nil {
		w.releaseSpool(s)
		return nil, s.err
	}
	return s, nil
}

// releaseSpool ends one request's use of s; the last drops its table.
func (w *Worker) releaseSpool(s *spool) {
	w.mu.Lock()
	s.left--
	done := s.left <= 0
	if done && w.spools[s.key] == s {
		delete(w.spools, s.key)
	}
	w.mu.Unlock()
	if done {
		w.dropSpool(s)
	}
}

func (w *Worker) dropSpool(s *spool) {
	<-s.ready
	_, _ = w.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+quote(s.table))
}

// dropSpools drops the spools of tag (Cancel), or, with tag empty, those
// created before idleBefore (their query went away) or all (zero time).
func (w *Worker) dropSpools(tag string, idleBefore time.Time, all bool) {
	w.mu.Lock()
	var gone []*spool
	for k, s := range w.spools {
		if all || (tag != "" && s.tag == tag) || (tag == "" && !idleBefore.IsZero() && s.created.Before(idleBefore)) {
			gone = append(gone, s)
			delete(w.spools, k)
		}
	}
	w.mu.Unlock()
	for _, s := range gone {
		w.dropSpool(s)
	}
}

// shareSQL is receiver i of n's request for its share of a spooled input.
func shareSQL(key string, i, n int) string {
	return fmt.Sprintf("SELECT * FROM {spool} WHERE %s %% %d = %d", quote(key), n, i)
}

// withSpool names the spool's table in a share request.
func withSpool(sqlText, table string) string {
	return strings.ReplaceAll(sqlText, "{spool}", quote(table))
}
