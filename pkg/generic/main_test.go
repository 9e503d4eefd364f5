package generic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/test/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// interopIDL is the Interop service every interop test serves.
func interopIDL() string { return filepath.Join(testutil.TestdataDir(), "interop.thrift") }

func loadInterop(t testing.TB) *generic.Service {
	t.Helper()
	d, err := generic.Load(interopIDL())
	if err != nil {
		t.Fatal(err)
	}
	svc, err := d.Service("Interop")
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// interopHandler is the reference Interop behaviour (testutil.ApacheHandler)
// written against JSON, as a generic server's handler sees calls.
type interopHandler struct {
	mu    sync.Mutex
	notes []string
}

func (h *interopHandler) handle(ctx context.Context, method string, args []byte) ([]byte, error) {
	if method == "echoBinary" {
		// The arguments are compact JSON in IDL order, {"data":"..."}:
		// slicing out the value keeps the 16 MiB echo of the suites from
		// parsing 22 MB of base64 twice under the race detector.
		return bytes.TrimSuffix(bytes.TrimPrefix(args, []byte(`{"data":`)), []byte("}")), nil
	}
	var a map[string]json.RawMessage
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, err
	}
	switch method {
	case "ping":
		return nil, nil
	case "echoAll":
		return a["v"], nil
	case "echoBinary":
		return a["data"], nil
	case "echoString":
		return a["s"], nil
	case "add":
		var x, y int64
		if err := json.Unmarshal(a["a"], &x); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(a["b"], &y); err != nil {
			return nil, err
		}
		return json.Marshal(x + y)
	case "mayFail":
		switch string(a["code"]) {
		case "0":
			return []byte("42"), nil
		case "1":
			return nil, &generic.Exception{Type: "InteropError", JSON: []byte(`{"code":1,"message":"boom"}`)}
		case "2":
			return nil, &generic.Exception{Field: "other", Value: map[string]any{"reason": "other"}}
		}
		return nil, testutil.ErrUndeclared
	case "notify":
		var s string
		if err := json.Unmarshal(a["msg"], &s); err != nil {
			return nil, err
		}
		h.mu.Lock()
		h.notes = append(h.notes, s)
		h.mu.Unlock()
		return nil, nil
	case "drainNotes":
		h.mu.Lock()
		out := h.notes
		h.notes = nil
		h.mu.Unlock()
		if out == nil {
			out = []string{}
		}
		return json.Marshal(out)
	case "sleep":
		var ms int32
		if err := json.Unmarshal(a["ms"], &ms); err != nil {
			return nil, err
		}
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return a["ms"], nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return nil, errors.New("no such method " + method)
}
