package testutil

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// Pokes is the per-connection order case: oneway poke(1: i32 n) adds n,
// pokes() returns the sum so far and starts it again. A client that
// sends poke(5), poke(6), pokes() on one connection must get 11: its
// messages run in the order sent. Each handler first yields or sleeps a
// random moment, so a server that ran them concurrently would be caught.
type Pokes struct {
	mu  sync.Mutex
	sum int32
}

// Client-side descriptors of the Pokes service.
var (
	PokeMethod  = &client.Method{Service: "Pokes", Name: "poke", Oneway: true}
	PokesMethod = &client.Method{Service: "Pokes", Name: "pokes"}
)

// Service returns the "Pokes" service.
func (p *Pokes) Service() *server.Service {
	return &server.Service{Name: "Pokes", Methods: []server.Method{
		{Name: "poke", Oneway: true, NewArgs: func() proto.Struct { return &I32Struct{ID: 1} }, Handle: p.poke},
		{Name: "pokes", NewArgs: func() proto.Struct { return new(EmptyStruct) }, Handle: p.pokes},
	}}
}

// Dawdle is a server interceptor that yields or sleeps a random moment
// before every handler: calls of one connection run concurrently would
// then finish out of order now and then.
func Dawdle() server.Interceptor {
	return func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		dawdle()
		return next(ctx, args)
	}
}

// dawdle yields or sleeps up to 200 µs, at random.
func dawdle() {
	switch n := rand.IntN(4); n {
	case 0:
	case 1:
		runtime.Gosched()
	default:
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
	}
}

func (p *Pokes) poke(_ context.Context, a proto.Struct) (proto.Struct, error) {
	dawdle()
	p.mu.Lock()
	p.sum += a.(*I32Struct).V
	p.mu.Unlock()
	return nil, nil
}

func (p *Pokes) pokes(context.Context, proto.Struct) (proto.Struct, error) {
	dawdle()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sum
	p.sum = 0
	return &I32Struct{ID: 0, V: s, Set: true}, nil
}

// PokeRound sends poke(a), poke(b), pokes() on c and returns the sum.
func PokeRound(ctx context.Context, c *client.Conn, a, b int32) (int32, error) {
	for _, n := range []int32{a, b} {
		if err := c.Call(ctx, PokeMethod, &I32Struct{ID: 1, V: n, Set: true}, nil); err != nil {
			return 0, err
		}
	}
	res := I32Struct{ID: 0}
	if err := c.Call(ctx, PokesMethod, new(EmptyStruct), &res); err != nil {
		return 0, err
	}
	return res.V, nil
}
