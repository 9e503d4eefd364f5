//go:build !cgo || !linux

package client

import (
	"context"
	"time"

	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// laneStream: no lanes in this build; every stream goes over TCP.
func (c *Conn) laneStream(context.Context, *session, *Method, proto.Struct, time.Duration) (Stream, error) {
	return nil, nil
}

// StreamRoutes: no stream takes a lane in this build.
func (c *Conn) StreamRoutes() (lane, tcp uint64) { return 0, 0 }

// laneRunner: no lane runs a stream in this build (clientStream.laneDrv
// stays nil).
type laneRunner struct{}

func (*laneRunner) driveHere(held *streamcore.Msg) { releaseStreamMsg(held) }
