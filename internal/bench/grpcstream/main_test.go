package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRawCodec(t *testing.T) {
	var c rawCodec
	in := []byte("hello, stream")
	out, err := c.Marshal(&in)
	require.NoError(t, err)
	require.Equal(t, in, out.Materialize())

	// Received data may come in several buffers: they are joined, and the
	// destination's capacity is reused.
	dst := make([]byte, 0, 64)
	data := mem.BufferSlice{mem.SliceBuffer([]byte("hello, ")), mem.SliceBuffer([]byte("stream"))}
	require.NoError(t, c.Unmarshal(data, &dst))
	require.Equal(t, "hello, stream", string(dst))
	require.Equal(t, 64, cap(dst))

	_, err = c.Marshal("not bytes")
	require.EqualError(t, err, "raw codec: cannot marshal string, want *[]byte")
	require.EqualError(t, c.Unmarshal(data, new(string)), "raw codec: cannot unmarshal into *string, want *[]byte")
}

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    request
		wantErr string
	}{
		{"ok", request{count: 5, size: 65536}.encode(), request{count: 5, size: 65536}, ""},
		{"empty", nil, request{}, "grpc-stream: bad request: 0 bytes, want 12"},
		{"too large", request{count: 1, size: maxMessage + 1}.encode(), request{}, "grpc-stream: bad request: count 1, size 67108865 (at most 67108864)"},
		{"negative count", request{count: -1, size: 1}.encode(), request{}, "grpc-stream: bad request: count -1, size 1 (at most 67108864)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeRequest(tt.in)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestMeasure streams through a real gRPC server on loopback and checks
// every message arrived (pull checks each one's length and ends).
func TestMeasure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := newServer()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() { srv.Stop(); require.NoError(t, <-done) }()

	for _, size := range []int{0, 64, 4 << 10, 64 << 10} {
		res, err := measure(ctx, ln.Addr().String(), size, 100, 10)
		require.NoError(t, err, "size %d", size)
		require.Equal(t, int64(100), res.Messages)
		require.Equal(t, int64(100*size), res.Bytes)
		require.Positive(t, res.Elapsed)
	}
}
