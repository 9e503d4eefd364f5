package testutil

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/pkg/server"
	hg "github.com/hatrpc/hatrpc/test/gen/interop"
	"github.com/hatrpc/hatrpc/test/gen/interop/interopserver"
)

// HatHandler is the reference Interop implementation on HatRPC's side,
// written against the hatgen-generated interface. It behaves exactly like
// ApacheHandler so the same client suites pass against both servers.
type HatHandler struct {
	mu    sync.Mutex
	notes []string
}

var _ hg.InteropHandler = (*HatHandler)(nil)

func (h *HatHandler) Ping(context.Context) error { return nil }

func (h *HatHandler) EchoAll(_ context.Context, v *hg.AllTypes) (*hg.AllTypes, error) {
	return v, nil
}

func (h *HatHandler) EchoBinary(_ context.Context, data []byte) ([]byte, error) {
	return data, nil
}

func (h *HatHandler) EchoString(_ context.Context, s string) (string, error) { return s, nil }

func (h *HatHandler) Add(_ context.Context, a int32, b int64) (int64, error) {
	return int64(a) + b, nil
}

func (h *HatHandler) MayFail(_ context.Context, code int32) (int32, error) {
	switch code {
	case 0:
		return 42, nil
	case 1:
		return 0, &hg.InteropError{Code: 1, Message: "boom"}
	case 2:
		return 0, &hg.OtherError{Reason: "other"}
	default:
		return 0, ErrUndeclared
	}
}

func (h *HatHandler) Notify(_ context.Context, msg string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notes = append(h.notes, msg)
	return nil
}

func (h *HatHandler) DrainNotes(context.Context) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.notes
	h.notes = nil
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func (h *HatHandler) Sleep(ctx context.Context, ms int32) (int32, error) {
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return ms, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// StartHatInterop serves the generated Interop service with HatHandler.
func StartHatInterop(t testing.TB, opts ...server.Option) (*Running, *HatHandler) {
	t.Helper()
	h := &HatHandler{}
	r := StartServerWith(t, func(s *server.Server) { interopserver.RegisterInterop(s, h) }, opts...)
	return r, h
}
