package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Thrift over HTTP: a Conn dialled with an http:// or https:// URL sends
// each call as one HTTP POST whose body is the call's unframed Thrift
// message (content type application/x-thrift, as Apache's THttpClient
// does) and reads the reply from the response body; with WithTHeader the
// body is one THeader frame, as Apache's THeaderProtocol over THttpClient
// sends it, and the call's headers travel in it. Calls run concurrently,
// one request each, over the keep-alive connections of one
// http.Transport per Conn.

// HTTPError is the error of a call over HTTP that the server answered
// with a status other than 200 OK. A 413 (request too large) matches
// proto.ErrSizeLimit.
type HTTPError struct {
	URL    string
	Status int
	Msg    string // the start of the response body
}

func (e *HTTPError) Error() string {
	msg := ""
	if e.Msg != "" {
		msg = ": " + e.Msg
	}
	return fmt.Sprintf("client: %s answered HTTP %d %s%s", e.URL, e.Status, http.StatusText(e.Status), msg)
}

// Is makes a 413 match proto.ErrSizeLimit.
func (e *HTTPError) Is(target error) bool {
	return target == proto.ErrSizeLimit && e.Status == http.StatusRequestEntityTooLarge
}

// isHTTPAddr tells the addresses Dial serves over HTTP.
func isHTTPAddr(addr string) bool {
	return strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://")
}

type httpTransport struct {
	url    string
	hc     *http.Client
	header http.Header // WithHTTPHeader's, sent with every call
	seq    atomic.Int32
	closed context.Context
	close  context.CancelFunc
}

// newHTTPTransport checks the options against an HTTP address and makes
// the Conn's transport.
func newHTTPTransport(addr string, o *options) (*httpTransport, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("client: address %q: %w", addr, err)
	}
	switch {
	case u.Host == "":
		return nil, fmt.Errorf("client: address %q has no host", addr)
	case o.outerFrame:
		return nil, fmt.Errorf("client: WithFramedTHeader does not apply to %s: an HTTP body carries one THeader frame (WithTHeader)", addr)
	case o.framed && !o.theader:
		return nil, fmt.Errorf("client: WithFramed does not apply to %s: an HTTP body carries one unframed message", addr)
	case o.tls != nil && u.Scheme != "https":
		return nil, fmt.Errorf("client: WithTLS needs an https:// address, not %s", addr)
	}
	for k, vs := range o.httpHeader {
		for _, v := range vs {
			if !metadata.ValidHTTPHeader(k, v) {
				return nil, fmt.Errorf("client: WithHTTPHeader(%q, %q): not a valid HTTP header", k, v)
			}
		}
	}
	d := &net.Dialer{Timeout: o.dialTimeout}
	dial := d.DialContext
	if o.dial != nil {
		dial = func(ctx context.Context, _, a string) (net.Conn, error) { return o.dial(ctx, a) }
	}
	var tc *tls.Config
	if o.tls != nil {
		tc = o.tls.Clone()
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dial,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: o.dialTimeout,
		ForceAttemptHTTP2:   true,
		// Thrift bodies are mostly binary and the peers near: gzip (which
		// Apache's handler applies when asked) costs more CPU than it
		// saves wire time; 16 MiB replies took three times as long.
		DisableCompression:  true,
		MaxIdleConns:        httpIdleConns,
		MaxIdleConnsPerHost: httpIdleConns,
		IdleConnTimeout:     90 * time.Second,
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &httpTransport{url: addr, hc: &http.Client{Transport: tr}, header: o.httpHeader,
		closed: ctx, close: cancel}, nil
}

// httpIdleConns is how many keep-alive connections a Conn keeps to its
// server between calls: as many as concurrent callers commonly need.
const httpIdleConns = 64

func (h *httpTransport) shutdown() {
	h.close()
	h.hc.CloseIdleConnections()
}

// call makes one call as one POST.
func (h *httpTransport) call(ctx context.Context, c *Conn, m *Method, args, result proto.Struct, use func() error) error {
	if h.closed.Err() != nil {
		return &ConnError{Op: "call", Err: errors.New("Conn closed")}
	}
	// Close fails the calls in flight, as it does on TCP.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.closed, cancel)()

	name := m.Name
	if c.o.multiplexed && m.Service != "" {
		name = m.Service + ":" + m.Name
	}
	typ := proto.Call
	if m.Oneway {
		typ = proto.Oneway
	}
	seq := h.seq.Add(1) & 0x7fffffff
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	// Not a pooled buffer: the HTTP transport may read a request body
	// after Do returned.
	var body []byte
	md, rid := c.outgoing(ctx)
	if c.o.theader {
		body = appendTHeaderRequest(body, c.o.proto, seq, md, rid)
	}
	body, err := codec.AppendMessage(body, c.o.proto, name, typ, seq, args)
	if err != nil {
		return err
	}
	if c.o.theader {
		binary.BigEndian.PutUint32(body, uint32(len(body)-4))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	maps.Copy(req.Header, h.header)
	if !c.o.theader {
		for k, v := range md {
			if !metadata.ValidHTTPHeader(k, v) {
				return fmt.Errorf("client: header %q: %q cannot travel as an HTTP header", k, v)
			}
			req.Header.Set(k, v)
		}
		if rid {
			req.Header.Set(metadata.RequestIDKey, metadata.NewRequestID())
		}
	}
	req.Header.Set("Content-Type", "application/x-thrift")
	req.Header.Set("Accept", "application/x-thrift")
	resp, err := h.hc.Do(req)
	if err != nil {
		if h.closed.Err() != nil {
			return &ConnError{Op: "close"}
		}
		return callFailed(ctx, "http", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return &HTTPError{URL: h.url, Status: resp.StatusCode, Msg: strings.TrimSpace(string(msg))}
	}
	lim := &c.o.limits
	reply, err := io.ReadAll(io.LimitReader(resp.Body, int64(lim.MaxMessageSize)+1))
	switch {
	case err != nil:
		return callFailed(ctx, "http", err)
	case len(reply) > lim.MaxMessageSize:
		return fmt.Errorf("client: reply from %s larger than %d bytes: %w", h.url, lim.MaxMessageSize, proto.ErrSizeLimit)
	case m.Oneway:
		return nil
	}
	if dst := metadata.ReplyCapture(ctx); dst != nil {
		*dst = replyHTTP(resp.Header)
	}
	if c.o.theader {
		info, msg, err := parseTHeaderReply(reply, c.o.proto, lim.MaxMessageSize)
		if err != nil {
			return fmt.Errorf("client: reply from %s: %w", h.url, err)
		}
		if dst := metadata.ReplyCapture(ctx); dst != nil && len(info) > 0 {
			*dst = info
		}
		reply = msg
	}
	mh, err := wire.ParseMsgHeader(c.o.proto, reply)
	if err != nil {
		return fmt.Errorf("client: reply from %s: %w", h.url, err)
	}
	if mh.Seqid != seq {
		return fmt.Errorf("client: reply from %s has sequence id %d, the call %d: %w", h.url, mh.Seqid, seq, proto.ErrInvalidData)
	}
	if err := decodeReply(codec, c.o.proto, reply, lim, result, copyBinaries); err != nil {
		return ownDeadline(ctx, err)
	}
	if use != nil {
		return use()
	}
	return nil
}

// appendTHeaderRequest appends the start of a THeader frame to b: the
// 4-byte length (filled in once the message is appended) and the THeader
// header carrying md and, with rid, a fresh request id.
func appendTHeaderRequest(b []byte, p proto.Protocol, seq int32, md metadata.MD, rid bool) []byte {
	h := wire.THeaderInfo{Seqid: seq, Proto: p, Info: md}
	if rid {
		h.Info = maps.Clone(md)
		if h.Info == nil {
			h.Info = metadata.MD{}
		}
		h.Info[metadata.RequestIDKey] = metadata.NewRequestID()
	}
	if !wire.THeaderHeadFits(h.Info) {
		h.Info = nil
	}
	return wire.AppendTHeaderHead(append(b, 0, 0, 0, 0), &h, false)
}

// parseTHeaderReply takes the THeader frame of an HTTP reply body apart:
// its info headers and its message (inflated if the server compressed
// it), which must be in the request's protocol.
func parseTHeaderReply(body []byte, p proto.Protocol, maxSize int) (metadata.MD, []byte, error) {
	if len(body) < 4 || int(binary.BigEndian.Uint32(body)) != len(body)-4 {
		return nil, nil, fmt.Errorf("%w: a THeader reply body of %d bytes with a frame length that does not match", wire.ErrTHeader, len(body))
	}
	h, msg, err := wire.ParseTHeader(body[4:], maxSize)
	if err != nil {
		return nil, nil, err
	}
	if h.Proto != p {
		return nil, nil, &proto.ApplicationException{Type: proto.ExcInvalidProtocol,
			Message: "THeader reply in " + h.Proto.String() + ", request in " + p.String()}
	}
	return h.Info, msg, nil
}

// replyHTTP makes a response's headers the reply metadata a caller
// captures: keys in lower case, repeated ones joined with ", ", without
// the ones that describe the HTTP response itself.
func replyHTTP(h http.Header) metadata.MD {
	md := make(metadata.MD, len(h))
	for k, vs := range h {
		switch k {
		case "Content-Type", "Content-Length", "Date", "Connection", "Keep-Alive", "Transfer-Encoding", "Content-Encoding":
			continue
		}
		md[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	if len(md) == 0 {
		return nil
	}
	return md
}
