// Command client uses the example log service's three streams and its
// unary call.
//
//	go run ./examples/stream/client -addr 127.0.0.1:9091
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"strings"
	"time"

	"github.com/hatrpc/hatrpc/examples/stream/gen/logs"
	"github.com/hatrpc/hatrpc/pkg/client"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9091", "server address")
	source := flag.String("source", "app", "log source to upload to and tail")
	flag.Parse()

	// The context bounds the whole run; canceling a stream's context ends
	// that stream on both sides.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	conn, err := client.Dial(ctx, *addr)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	c := logs.NewLogsClient(conn)

	// Client stream: many Chunks, one UploadSummary.
	up, err := c.Upload(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		data := fmt.Sprintf("line %d of chunk %d\nline %d of chunk %d\n", 2*i-1, i, 2*i, i)
		// io.EOF from Send: the server ended the stream; CloseAndRecv says why.
		if err := up.Send(&logs.Chunk{Source: *source, Data: []byte(data)}); err != nil && err != io.EOF {
			log.Fatal(err)
		}
	}
	sum, err := up.CloseAndRecv()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("upload: %d chunks, %d bytes\n", sum.Chunks, sum.Bytes)

	// Server stream: one TailRequest, Lines until io.EOF.
	tail, err := c.Tail(ctx, &logs.TailRequest{Source: *source, Last: 4})
	if err != nil {
		log.Fatal(err)
	}
	for {
		line, err := tail.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("tail: %d %s\n", line.Seq, line.Text)
	}
	fmt.Printf("tail: end, trailer lines=%s\n", tail.Trailer()["lines"])

	// A declared exception ends a stream: Recv returns it, typed.
	tail, err = c.Tail(ctx, &logs.TailRequest{Source: "nowhere"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = tail.Recv()
	var missing *logs.NoSuchSource
	if !errors.As(err, &missing) {
		log.Fatalf("expected NoSuchSource, got %v", err)
	}
	fmt.Printf("tail of %q refused: no such source\n", missing.Source)

	// An upload past the quota ends with the declared QuotaExceeded.
	up, err = c.Upload(ctx)
	if err != nil {
		log.Fatal(err)
	}
	big := []byte(strings.Repeat("x", 64<<10) + "\n")
	for i := 0; i < 32; i++ { // 2 MiB, over the 1 MiB quota
		if err := up.Send(&logs.Chunk{Source: "big", Data: big}); err == io.EOF {
			break // the server ended the stream early
		} else if err != nil {
			log.Fatal(err)
		}
	}
	_, err = up.CloseAndRecv()
	var over *logs.QuotaExceeded
	if !errors.As(err, &over) {
		log.Fatalf("expected QuotaExceeded, got %v", err)
	}
	fmt.Printf("big upload refused: quota %d bytes\n", over.LimitBytes)

	// Bidirectional stream: send and receive independently; here one
	// goroutine sends while this one receives.
	chat, err := c.Chat(ctx)
	if err != nil {
		log.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		for _, text := range []string{"hello", "how are the logs?"} {
			if err := chat.Send(&logs.ChatMessage{Author: "client", Text: text}); err != nil {
				sent <- err
				return
			}
		}
		sent <- chat.CloseSend() // the server's Recv sees io.EOF
	}()
	for {
		msg, err := chat.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("chat: %s\n", msg.Text)
	}
	if err := <-sent; err != nil {
		log.Fatal(err)
	}

	// A unary call on the same connection, between and beside streams.
	n, err := c.Count(ctx, *source)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("count: %d lines\n", n)
}
