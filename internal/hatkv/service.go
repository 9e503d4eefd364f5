package hatkv

import (
	"context"
	"errors"
	"fmt"

	"github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// Store is what the service needs from the storage engine; *kvstore.Store
// implements it.
type Store interface {
	Get(ctx context.Context, key string, fields ...string) (kvstore.Record, error)
	MultiGet(ctx context.Context, keys []string, fields ...string) ([]kvstore.Record, error)
	// ScanCut is a Scan that may stop short of count records to keep
	// its reply within a size; it reports whether it did.
	ScanCut(ctx context.Context, startKey string, count int, fields ...string) ([]kvstore.KV, bool, error)
	// ScanStream hands the records of a range to send batch by batch.
	ScanStream(ctx context.Context, r kvstore.ScanRange, send func([]kvstore.KV) error) error
	Put(ctx context.Context, key string, fields kvstore.Record) error
	MultiPut(ctx context.Context, kvs []kvstore.KV) error
	Delete(ctx context.Context, key string) error
	Stats(ctx context.Context) (kvstore.Stats, error)
	MaxKeySize() int
}

// Service implements the generated hatkv.HatKVHandler on a Store.
type Service struct {
	store Store
}

var _ hatkv.HatKVHandler = (*Service)(nil)

// NewService returns the RPC handler for store.
func NewService(store Store) *Service { return &Service{store: store} }

// Get implements hatkv.HatKVHandler.
func (s *Service) Get(ctx context.Context, key string, fields []string) (hatkv.Record, error) {
	rec, err := s.store.Get(ctx, key, fields...)
	if err != nil {
		return nil, mapError(err, key)
	}
	return hatkv.Record(rec), nil
}

// Put implements hatkv.HatKVHandler.
func (s *Service) Put(ctx context.Context, key string, fields hatkv.Record) error {
	if len(fields) == 0 {
		return &hatkv.InvalidArgument{Message: fmt.Sprintf("put %q: no fields given", key)}
	}
	return mapError(s.store.Put(ctx, key, kvstore.Record(fields)), key)
}

// Delete implements hatkv.HatKVHandler.
func (s *Service) Delete(ctx context.Context, key string) error {
	return mapError(s.store.Delete(ctx, key), key)
}

// MultiGet implements hatkv.HatKVHandler.
func (s *Service) MultiGet(ctx context.Context, keys []string, fields []string) ([]*hatkv.Lookup, error) {
	recs, err := s.store.MultiGet(ctx, keys, fields...)
	if err != nil {
		return nil, mapError(err, "")
	}
	out := make([]*hatkv.Lookup, len(recs))
	for i, r := range recs {
		out[i] = &hatkv.Lookup{Found: r != nil, Record: hatkv.Record(r)}
	}
	return out, nil
}

// MultiPut implements hatkv.HatKVHandler.
func (s *Service) MultiPut(ctx context.Context, records []*hatkv.KeyRecord) error {
	kvs := make([]kvstore.KV, len(records))
	for i, r := range records {
		if r == nil {
			return &hatkv.InvalidArgument{Message: fmt.Sprintf("multiput: record %d is missing", i)}
		}
		if len(r.Record) == 0 {
			return &hatkv.InvalidArgument{Message: fmt.Sprintf("multiput: record %d (%q) has no fields", i, r.Key)}
		}
		kvs[i] = kvstore.KV{Key: r.Key, Record: kvstore.Record(r.Record)}
	}
	return mapError(s.store.MultiPut(ctx, kvs), "")
}

// ScanCutHeader is the reply header a server sets on a Scan it cut short
// of count records to keep the reply within kvstore.Limits.MaxScanBytes:
// keys after the last record returned were not looked at, so a client
// merging several servers' answers must not pass that key. A reply can
// carry headers only for a call that sent some (a fast-path call sends
// none unless its context sets them), so a client that needs to know
// sends the header itself (any value).
const ScanCutHeader = "hatkv-scan-cut"

// Scan implements hatkv.HatKVHandler.
func (s *Service) Scan(ctx context.Context, startKey string, count int32, fields []string) ([]*hatkv.KeyRecord, error) {
	rctx, room := scanRoom(ctx)
	kvs, cut, err := s.store.ScanCut(rctx, startKey, int(count), fields...)
	if err != nil {
		return nil, mapError(err, startKey)
	}
	if cut {
		markScanCut(ctx, *room)
	}
	out := make([]*hatkv.KeyRecord, len(kvs))
	for i, kv := range kvs {
		out[i] = &hatkv.KeyRecord{Key: kv.Key, Record: hatkv.Record(kv.Record)}
	}
	return out, nil
}

// ScanStream implements hatkv.HatKVHandler: one message per batch of the
// store's (kvstore.Store.ScanStreamWire says what a batch is and the
// consistency). Send blocks while the client's window is full; no LMDB
// transaction is open meanwhile.
func (s *Service) ScanStream(req *hatkv.ScanRequest, stream hatkv.HatKVScanStreamServer) error {
	err := s.store.ScanStream(stream.Context(), scanRange(req), func(kvs []kvstore.KV) error {
		b := &hatkv.ScanBatch{Records: make([]*hatkv.KeyRecord, len(kvs))}
		for i, kv := range kvs {
			b.Records[i] = &hatkv.KeyRecord{Key: kv.Key, Record: hatkv.Record(kv.Record)}
		}
		return stream.Send(b)
	})
	return mapError(err, req.StartKey)
}

func scanRange(req *hatkv.ScanRequest) kvstore.ScanRange {
	return kvstore.ScanRange{Start: req.StartKey, End: req.EndKey, Fields: req.Fields, Limit: req.Limit, BatchRecords: int(req.BatchRecords)}
}

// Stats implements hatkv.HatKVHandler.
func (s *Service) Stats(ctx context.Context) (*hatkv.StoreStats, error) {
	st, err := s.store.Stats(ctx)
	if err != nil {
		return nil, mapError(err, "")
	}
	return &hatkv.StoreStats{
		Records:       int64(st.Records),
		MapSize:       st.MapSize,
		UsedBytes:     st.UsedBytes,
		MaxReaders:    int32(st.MaxReaders),
		NumReaders:    int32(st.NumReaders),
		LastTxnID:     int64(st.LastTxnID),
		Gets:          int64(st.Gets),
		Puts:          int64(st.Puts),
		Deletes:       int64(st.Deletes),
		Scans:         int64(st.Scans),
		Commits:       int64(st.Commits),
		BatchedWrites: int64(st.BatchedWrites),
		MaxBatch:      int64(st.MaxBatch),
		SyncMode:      st.Sync.String(),
		CommitMode:    st.Commit.String(),
		WriteMap:      st.WriteMap,
		MaxKeySize:    int32(s.store.MaxKeySize()),
		MapGrowths:    int64(st.MapGrowths),
	}, nil
}

// badInput are the kvstore errors caused by the request itself.
var badInput = []error{
	kvstore.ErrEmptyKey, kvstore.ErrKeyTooLong, kvstore.ErrValueTooLarge,
	kvstore.ErrTooManyFields, kvstore.ErrInvalidField, kvstore.ErrScanTooLong,
	kvstore.ErrBatchTooLarge, kvstore.ErrBadRange,
}

// mapError turns kvstore's typed errors into the IDL's declared exceptions,
// so clients see a typed, explained failure instead of INTERNAL_ERROR. Other
// errors (closed store, corrupt record, I/O) stay internal errors.
func mapError(err error, key string) error {
	if err == nil {
		return nil
	}
	msg := stripPrefix(err.Error())
	switch {
	case errors.Is(err, kvstore.ErrNotFound):
		return &hatkv.NotFound{Message: fmt.Sprintf("key %q not found", key), Key: key}
	case errors.Is(err, kvstore.ErrDiskFull):
		return &hatkv.StoreFull{Message: msg + "; reads still work, writes and deletes once space is freed"}
	case errors.Is(err, kvstore.ErrStoreFull):
		return &hatkv.StoreFull{Message: msg + "; reads and deletes still work"}
	}
	for _, b := range badInput {
		if errors.Is(err, b) {
			return &hatkv.InvalidArgument{Message: msg}
		}
	}
	return err
}

func stripPrefix(s string) string {
	const p = "kvstore: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// markScanCut tells the client its Scan was cut (ScanCutHeader): why is
// "" when by the store's scan size limit (the header says "1"), else
// what ended the reply's room in the RPC server (scanRoom).
func markScanCut(ctx context.Context, why string) {
	if why == "" {
		why = "1"
	}
	metadata.SetReply(ctx, ScanCutHeader, why)
}

// Values of ScanCutHeader for a Scan cut where its reply's room in the
// RPC server ended (server.ReserveReply): the connection's memory share
// (a later Scan may get more) or the message limit.
const (
	ScanCutMemory       = "memory"
	ScanCutMessageLimit = "message-limit"
)

// scanRoom returns ctx for a Scan whose answer reserves room for its
// reply as it grows (server.ReserveReply), so that a Scan far larger
// than the method's earlier replies is cut where the connection's
// memory share or the message limit ends instead of being built
// uncharged (issue 43: 64 Scans of 10,000 records after one of 1 grew a
// server +399 MB over a 320 MiB budget), and what ended that room ("":
// nothing) if it cut the Scan.
func scanRoom(ctx context.Context) (context.Context, *string) {
	why := new(string)
	return kvstore.WithScanRoom(ctx, func(bytes, records int) bool {
		err := server.ReserveReply(ctx, scanReplySize(bytes, records))
		var re *server.ReplyRoomError
		switch {
		case err == nil:
			*why = ""
		case errors.As(err, &re) && re.MessageLimit:
			*why = ScanCutMessageLimit
		default:
			*why = ScanCutMemory
		}
		return err == nil
	}), why
}

// scanReplySize bounds the encoded Scan reply of records keys and
// records taking bytes (as kvstore counts them): each KeyRecord adds
// its field headers, the key's length and a stop (11 bytes in binary),
// the message its header and the result struct.
func scanReplySize(bytes, records int) int {
	return bytes + 16*records + 64
}
