// Command server serves the example log service: sources of text lines
// kept in memory, tailed by a server stream, filled by a client stream,
// and a chat over a bidirectional stream.
//
//	go run ./examples/stream/server -addr 127.0.0.1:9091
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hatrpc/hatrpc/examples/stream/gen/logs"
	"github.com/hatrpc/hatrpc/examples/stream/gen/logs/logsserver"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/server"
)

// quota bounds the bytes one source may hold, so an upload can fail with
// the declared QuotaExceeded.
const quota = 1 << 20

// handler implements logs.LogsHandler, the interface hatgen generated
// from the service in logs.thrift.
type handler struct {
	mu      sync.Mutex
	sources map[string][]string
	bytes   map[string]int64
}

// Tail is a server stream: one request in, as many Lines out as it likes.
// Returning nil ends the stream cleanly (the client's Recv says io.EOF).
func (h *handler) Tail(req *logs.TailRequest, stream logs.LogsTailServer) error {
	h.mu.Lock()
	lines, ok := h.sources[req.Source]
	if req.Last > 0 && int(req.Last) < len(lines) {
		lines = lines[len(lines)-int(req.Last):]
	}
	h.mu.Unlock()
	if !ok {
		// A declared exception: the client's Recv returns it as *logs.NoSuchSource.
		return &logs.NoSuchSource{Source: req.Source}
	}
	stream.SetTrailer(metadata.Pairs("lines", fmt.Sprint(len(lines))))
	for i, text := range lines {
		// Send blocks while the client's window is full: a slow reader
		// slows the server down instead of filling its memory.
		if err := stream.Send(&logs.Line{Seq: int64(i), Text: text}); err != nil {
			return err // the client went away or canceled
		}
	}
	return nil
}

// Upload is a client stream: Chunks in until the client closes its side
// (io.EOF), then one UploadSummary out.
func (h *handler) Upload(stream logs.LogsUploadServer) error {
	var sum logs.UploadSummary
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&sum)
		}
		if err != nil {
			return err
		}
		h.mu.Lock()
		if h.bytes[chunk.Source]+int64(len(chunk.Data)) > quota {
			h.mu.Unlock()
			return &logs.QuotaExceeded{LimitBytes: quota}
		}
		h.bytes[chunk.Source] += int64(len(chunk.Data))
		for _, l := range bytes.Split(bytes.TrimSuffix(chunk.Data, []byte("\n")), []byte("\n")) {
			h.sources[chunk.Source] = append(h.sources[chunk.Source], string(l))
		}
		h.mu.Unlock()
		sum.Chunks++
		sum.Bytes += int64(len(chunk.Data))
	}
}

// Chat is a bidirectional stream: here every message is answered, but
// either side may send whenever it likes.
func (h *handler) Chat(stream logs.LogsChatServer) error {
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		reply := &logs.ChatMessage{Author: "server", Text: "heard " + msg.Author + ": " + msg.Text}
		if err := stream.Send(reply); err != nil {
			return err
		}
	}
}

// Count is a unary call, served on the same connection as the streams.
func (h *handler) Count(_ context.Context, source string) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	lines, ok := h.sources[source]
	if !ok {
		return 0, &logs.NoSuchSource{Source: source}
	}
	return int64(len(lines)), nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9091", "address to listen on")
	flag.Parse()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := server.New()
	logsserver.RegisterLogs(srv, &handler{sources: map[string][]string{}, bytes: map[string]int64{}})

	// Stop gracefully on Ctrl-C: let open streams and calls finish (for
	// up to 5 s), then close.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()

	fmt.Printf("logs server listening on %s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, server.ErrServerClosed) {
		log.Fatal(err)
	}
	fmt.Println("logs server stopped")
}
