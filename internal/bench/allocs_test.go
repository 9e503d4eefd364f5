package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/bench/gen/atb"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// echoCaller answers every call in place: the result is the argument.
type echoCaller struct{}

func (echoCaller) Call(_ context.Context, _ *client.Method, args, result proto.Struct) error {
	result.(*atb.EchoEchoResult).Success = args.(*atb.EchoEchoArgs).Payload
	return nil
}

func (c echoCaller) CallBorrowed(ctx context.Context, m *client.Method, args, result proto.Struct, use func() error) error {
	if err := c.Call(ctx, m, args, result); err != nil {
		return err
	}
	return use()
}

// reusingCaller is echoCaller promising to keep nothing of a call once it
// returns (client.Reuser), or not (reuses false).
type reusingCaller struct {
	echoCaller
	reuses bool
}

func (c reusingCaller) ReusesValues() bool { return c.reuses }

// TestGeneratedClientAllocs: a generated call allocates its args and
// result together (one allocation), plus the closure of a borrowed one;
// a borrowed call through a Caller that reuses values allocates nothing
// (its values come from a pool), and one whose Caller says it keeps
// them allocates as before.
func TestGeneratedClientAllocs(t *testing.T) {
	ctx := context.Background()
	p := []byte("payload")
	use := func(r []byte) error {
		if string(r) != string(p) {
			t.Fatalf("result %q, want %q", r, p)
		}
		return nil
	}
	c := atb.NewEchoClient(echoCaller{})
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() {
		r, err := c.Echo(ctx, p)
		if err != nil || len(r) != len(p) {
			t.Fatal(r, err)
		}
	}))
	for _, tc := range []struct {
		name   string
		c      client.Caller
		allocs float64
	}{
		{"plain caller", echoCaller{}, 2},
		{"reuser that keeps values", reusingCaller{reuses: false}, 2},
		{"reuser", reusingCaller{reuses: true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := atb.NewEchoClient(tc.c)
			require.Equal(t, tc.allocs, testing.AllocsPerRun(100, func() {
				if err := c.EchoBorrowed(ctx, p, use); err != nil {
					t.Fatal(err)
				}
			}))
		})
	}
}

// copyEcho answers with the payload, or with bad when set; inPlaceEcho
// checks that reply in place.
type copyEcho struct{ bad []byte }

func (c copyEcho) Echo(_ context.Context, p []byte) ([]byte, error) {
	if c.bad != nil {
		return c.bad, nil
	}
	return p, nil
}

func (copyEcho) Close() error { return nil }

type inPlaceEcho struct{ copyEcho }

func (c inPlaceEcho) EchoCheck(ctx context.Context, p []byte, check func([]byte) error) error {
	rep, _ := c.Echo(ctx, p)
	return check(rep)
}

// TestEchoerAllocs: the harness's part of a timed call allocates nothing,
// for callers that check in place and for the others alike, so it adds
// the same to every system's latency; a reply that differs is caught.
func TestEchoerAllocs(t *testing.T) {
	ctx := context.Background()
	bad := []byte("garbage")
	for _, tc := range []struct {
		name    string
		ok, bad Caller
	}{
		{"in place", inPlaceEcho{}, inPlaceEcho{copyEcho{bad}}},
		{"copy", copyEcho{}, copyEcho{bad}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEchoer(tc.ok, []byte("payload"))
			require.Zero(t, testing.AllocsPerRun(100, func() {
				if err := e.call(ctx); err != nil {
					t.Fatal(err)
				}
			}))
			require.ErrorIs(t, newEchoer(tc.bad, []byte("payload")).call(ctx), ErrEchoMismatch)
		})
	}
}
