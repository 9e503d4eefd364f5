package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hatrpc/hatrpc/pkg/generic"
	"github.com/hatrpc/hatrpc/pkg/idl"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// maxLine bounds one message read from stdin (a JSON line); the server's
// own message limit applies after.
const maxLine = 64 << 20

// messageError is a message on stdin that could not be sent.
type messageError struct {
	line int
	err  error
}

func (e *messageError) Error() string { return fmt.Sprintf("stdin line %d: %v", e.line, e.err) }

func (e *messageError) Unwrap() error { return e.err }

// callStream runs a stream of fn: it sends the messages in, prints each
// message the server sends as one line of JSON, and a client stream's
// reply as a call's result.
func callStream(ctx context.Context, w io.Writer, f *callFlags, gc *generic.Client, fn *idl.Function, in input) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := gc.Stream(ctx, fn.Name)
	if err != nil {
		return err
	}
	sent := make(chan error, 1)
	send := func() {
		err := sendAll(st, fn.Stream, in)
		if err == nil || errors.Is(err, io.EOF) { // EOF: the server ended the stream; Recv says how
			err = st.CloseSend()
			if errors.Is(err, io.EOF) {
				err = nil
			}
		}
		if err != nil {
			cancel() // a message that cannot be sent ends the stream
		}
		sent <- err
	}
	if fn.Stream == stream.Bidi {
		go send() // the server may answer before the client is done
	} else {
		send()
	}
	switch fn.Stream {
	case stream.Client:
		if err := <-sent; err != nil {
			return err
		}
		out, err := st.CloseAndRecvJSON()
		if err != nil {
			return err
		}
		printResult(w, f, out)
		return nil
	default:
		var recvErr error
		for {
			msg, err := st.RecvJSON()
			if err != nil {
				if err != io.EOF {
					recvErr = err
				}
				break
			}
			fmt.Fprintln(w, string(msg))
		}
		if err := <-sent; err != nil {
			return err // what ended the stream, before what the receiver saw of it
		}
		return recvErr
	}
}

// sendAll sends a server stream's one message (the argument, or {}), or a
// client or bidirectional stream's messages: the argument, or each line of
// stdin.
func sendAll(st *generic.Stream, mode stream.Mode, in input) error {
	if !mode.ClientSends() || in.given && !in.fromStdin {
		msg, err := in.all()
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(msg)) == 0 {
			msg = []byte("{}")
		}
		return st.SendJSON(msg)
	}
	sc := bufio.NewScanner(in.stdin)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for line := 1; sc.Scan(); line++ {
		msg := bytes.TrimSpace(sc.Bytes())
		if len(msg) == 0 {
			continue
		}
		if err := st.SendJSON(msg); err != nil {
			var ve *generic.ValueError
			if errors.As(err, &ve) {
				return &messageError{line: line, err: err}
			}
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	return nil
}
