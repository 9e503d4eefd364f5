package rdma

import "context"

// Serve answers requests with h by proto until ctx ends (returning nil) or
// the endpoint fails. Each request costs one cgo crossing: the reply and the
// wait for the next request are one call.
func (e *RPCEndpoint) Serve(ctx context.Context, proto Protocol, h func(req []byte) []byte) error {
	return e.ServeCalls(ctx, nil, func(req []byte) ([]byte, Protocol) { return h(req), proto })
}

// ServeOption configures ServeCalls.
type ServeOption func(*serveConfig)

type serveConfig struct {
	after    func()
	arrivals bool
}

// TimeArrivals makes Arrived valid for every request ServeCalls hands to
// its handler. Without it the engine reads no clock on the way from a
// request to its handler (~25 ns on a VM) unless the request came by RFP,
// whose reply carries the server's time; with it a polling wait reads the
// clock while nothing has come and stamps the request with its last read
// (see Arrived), so that read is off the request's way too.
func TimeArrivals() ServeOption {
	return func(c *serveConfig) { c.arrivals = true }
}

// AfterReply runs after once per reply, for the work a server has left
// once the reply is built that need not hold the reply up (its metrics, a
// reset for the next call). On an endpoint that spins while it waits (busy
// polling, or a spin set by SetSpin) the reply and the wait for the next
// request become two crossings and after runs between them, while the
// reply travels and the client takes it in: time the server would
// otherwise spend spinning. An endpoint that sleeps for its requests keeps
// the one crossing and runs after just before it, where the work was: the
// crossing between costs CPU, and the client waits for the reply anyway.
//
// after runs on the serving goroutine, before h sees the next request,
// also when the reply fails; it must not touch the request it follows
// (that lease ends with the reply).
func AfterReply(after func()) ServeOption {
	return func(c *serveConfig) { c.after = after }
}

// ServeCalls is Serve with the response protocol chosen per request by h,
// and a graceful stop: once stop is closed, the loop returns nil at the
// first idle moment (after answering the request in hand), so a draining
// server finishes its calls. ctx ending interrupts even a wait in C.
func (e *RPCEndpoint) ServeCalls(ctx context.Context, stop <-chan struct{}, h func(req []byte) ([]byte, Protocol), opts ...ServeOption) error {
	var cfg serveConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.arrivals {
		if err := e.timeArrivals(); err != nil {
			return err
		}
	}
	req, err := e.recvUntil(ctx, stop)
	for err == nil && req != nil {
		resp, proto := h(req)
		if cfg.after != nil && e.spins.Load() {
			err = e.Reply(ctx, proto, resp)
			e.splits++
			cfg.after()
			if err == nil {
				req, err = e.recvUntil(ctx, stop)
			}
			continue
		}
		if cfg.after != nil {
			cfg.after()
		}
		var idle bool
		req, idle, err = e.replyRecv(ctx, proto, resp)
		if idle {
			req, err = e.recvUntil(ctx, stop)
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// recvUntil is Recv that gives up (nil, nil) once stop is closed and a
// whole idle slice started after that passed: a request the client sent
// before it learned of the stop still arrives within that slice.
func (e *RPCEndpoint) recvUntil(ctx context.Context, stop <-chan struct{}) ([]byte, error) {
	stopped := false
	for {
		if stopped {
			return nil, nil
		}
		select {
		case <-stop:
			stopped = true
		default:
		}
		req, idle, err := e.recvSlice(ctx)
		if !idle {
			return req, err
		}
	}
}
