package wiretest

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// Echo is the test service's handler state; its channels let tests observe
// what handlers saw.
type Echo struct {
	Fired     chan string        // oneway "fire" deliveries
	Waiting   chan string        // ModeWaitCtx handlers that started (and now wait)
	Cancelled chan string        // ModeWaitCtx handlers whose context ended
	Deadlines chan time.Duration // remaining deadline seen by "echo" calls, if any
}

// NewEcho returns handler state with buffered channels.
func NewEcho() *Echo {
	return &Echo{
		Fired:     make(chan string, 1024),
		Waiting:   make(chan string, 1024),
		Cancelled: make(chan string, 1024),
		Deadlines: make(chan time.Duration, 1024),
	}
}

// Client-side method descriptors of the test service.
var (
	EchoMethod = &client.Method{Service: "Echo", Name: "echo"}
	FireMethod = &client.Method{Service: "Echo", Name: "fire", Oneway: true}
)

// Service returns the "Echo" service: echo(args) and oneway fire(args).
func (e *Echo) Service() *server.Service {
	return e.ServiceNamed("Echo")
}

// ServiceNamed returns the service registered under name.
func (e *Echo) ServiceNamed(name string) *server.Service {
	return &server.Service{Name: name, Methods: []server.Method{
		{Name: "echo", NewArgs: func() proto.Struct { return new(EchoArgs) }, Handle: e.echo},
		{Name: "fire", Oneway: true, NewArgs: func() proto.Struct { return new(EchoArgs) },
			Handle: func(ctx context.Context, a proto.Struct) (proto.Struct, error) {
				e.Fired <- a.(*EchoArgs).Msg
				return nil, nil
			}},
	}}
}

func (e *Echo) echo(ctx context.Context, a proto.Struct) (proto.Struct, error) {
	args := a.(*EchoArgs)
	if dl, ok := ctx.Deadline(); ok {
		select {
		case e.Deadlines <- time.Until(dl):
		default:
		}
	}
	if args.DelayNs > 0 {
		t := time.NewTimer(time.Duration(args.DelayNs))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	switch args.Mode {
	case ModePanic:
		panic("test panic: " + args.Msg)
	case ModeDeclared:
		return &EchoResult{Err: &EchoError{Code: 42, Why: args.Msg}}, nil
	case ModePlain:
		return nil, errors.New("plain failure: " + args.Msg)
	case ModeAppExc:
		return nil, proto.NewApplicationException(proto.ExcUnknown, "custom: "+args.Msg)
	case ModeWaitCtx:
		select {
		case e.Waiting <- args.Msg:
		default:
		}
		<-ctx.Done()
		e.Cancelled <- args.Msg
		return nil, ctx.Err()
	case ModeNoResult:
		return nil, nil
	case ModeRepeat:
		msg := strings.Repeat(args.Msg, RepeatTimes)
		return &EchoResult{Success: &msg}, nil
	}
	msg := args.Msg
	if args.Blob != nil {
		msg += string(args.Blob)
	}
	return &EchoResult{Success: &msg}, nil
}
