package wiretest

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Hostile is one hostile input for a server's plain Thrift port: Head is
// written first, then Tail (if any) is copied until the server stops
// reading; HalfClose ends the client's side after Head, so the server
// sees the stream end mid-message.
type Hostile struct {
	Name      string
	Head      []byte
	Tail      io.Reader
	HalfClose bool
}

// HostileDepth is how deep the nested JSON cases nest.
const HostileDepth = 10000

// HostileInputs are the hostile inputs of issue 42, calls of method,
// sized against lim (a server with those limits): truncated and 10,000-deep JSON, unframed and
// framed; HTTP POSTs whose body exceeds the message limit (a Content-Length
// of 1 TiB, and a chunked body that never ends); a TZlibTransport stream
// and a zlib THeader frame of a few KiB each that inflate past the
// message limit. Every one must end with an error and a closed connection.
func HostileInputs(lim proto.Limits, method string) []Hostile {
	call := `[1,"` + method + `",1,1,{`
	truncated := []byte(call + `"1":{"str":"half a mess`)
	// Field 9 (unknown to echo, so skipped) is a list of lists of lists...
	deep := append([]byte(call+`"9":{"lst":`), bytes.Repeat([]byte(`["lst",1,`), HostileDepth)...)
	over := lim.MaxMessageSize + lim.MaxMessageSize/4 + 1<<16 // what the bombs inflate to
	return []Hostile{
		{Name: "json truncated", Head: truncated, HalfClose: true},
		{Name: "json truncated in a frame", Head: append(frameLen(len(truncated)+64), truncated...), HalfClose: true},
		{Name: "json 10,000 deep", Head: deep},
		{Name: "json 10,000 deep in a frame", Head: append(frameLen(len(deep)), deep...)},
		{Name: "http content-length 1 TiB", Head: append([]byte("POST / HTTP/1.1\r\nHost: hatrpc\r\nContent-Type: application/x-thrift\r\nContent-Length: 1099511627776\r\n\r\n"), bytes.Repeat([]byte("a"), 64<<10)...)},
		{Name: "http chunked, never ends", Head: chunkedPost(call), Tail: endlessChunks{}},
		{Name: "http chunked, stalls", Head: chunkedPost(call)},
		{Name: "zlib bomb", Head: zlibBomb(method, over)},
		{Name: "zlib bomb in THeader", Head: theaderBomb(method, over)},
	}
}

// chunkedPost starts a chunked POST of a JSON call whose string never
// ends.
func chunkedPost(call string) []byte {
	return []byte("POST / HTTP/1.1\r\nHost: hatrpc\r\nContent-Type: application/x-thrift\r\nTransfer-Encoding: chunked\r\n\r\n" +
		chunk(call+`"1":{"str":"`))
}

func frameLen(n int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

func chunk(s string) string { return strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n" }

// endlessChunks is a chunked HTTP body of 'a's that never ends.
type endlessChunks struct{}

var aChunk = []byte(chunk(strings.Repeat("a", 4<<10)))

func (endlessChunks) Read(p []byte) (int, error) {
	n := 0
	for n+len(aChunk) <= len(p) {
		n += copy(p[n:], aChunk)
	}
	if n == 0 {
		return 0, io.ErrShortBuffer
	}
	return n, nil
}

// bombCall is an unframed binary call of method whose first field is n
// zero bytes, in strings of at most 1 MiB (each within any string limit).
func bombCall(method string, n int) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0x80, 1, 0, 1}, uint32(len(method)))
	b = append(append(b, method...), 0, 0, 0, 1)
	b = append(b, byte(proto.LIST), 0, 1, byte(proto.STRING))
	const piece = 1 << 20
	b = binary.BigEndian.AppendUint32(b, uint32((n+piece-1)/piece))
	for ; n > 0; n -= piece {
		k := min(n, piece)
		b = binary.BigEndian.AppendUint32(b, uint32(k))
		b = append(b, make([]byte, k)...)
	}
	return append(b, 0, 0) // the list's field's STOP, the args' STOP
}

// zlibBomb is a TZlibTransport stream (best compression, one flush) of a
// call that inflates to n bytes.
func zlibBomb(method string, n int) []byte {
	var out bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&out, zlib.BestCompression)
	_, _ = zw.Write(bombCall(method, n))
	_ = zw.Flush()
	return out.Bytes()
}

// theaderBomb is one THeader frame (binary, zlib transform) whose payload
// inflates to a call of n bytes.
func theaderBomb(method string, n int) []byte {
	// magic, flags, seqid 9, one header word: protocol binary, one
	// transform (zlib), no info.
	head := []byte{0x0f, 0xff, 0, 0, 0, 0, 0, 9, 0, 1, 0, 1, 1, 0}
	f := wire.CompressTHeader(append(head, bombCall(method, n)...), len(head))
	return append(frameLen(len(f)), f...)
}

// HostileResult is what a client saw of the server's answer.
type HostileResult struct {
	Reply  []byte // the first 64 KiB the server sent
	Closed bool   // the server closed the connection (EOF or reset)
	Err    error  // the read error that ended it
}

// SendHostile dials addr, sends h and reads until the server closes the
// connection or timeout passes.
func SendHostile(addr string, h Hostile, timeout time.Duration) (HostileResult, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return HostileResult{}, err
	}
	defer nc.Close()
	if err := nc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return HostileResult{}, err
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := nc.Write(h.Head); err != nil {
			return
		}
		if h.HalfClose {
			_ = nc.(*net.TCPConn).CloseWrite()
		}
		if h.Tail != nil {
			_, _ = io.Copy(nc, h.Tail) // until the server stops reading
		}
	}()
	var res HostileResult
	buf, rest := make([]byte, 64<<10), make([]byte, 64<<10)
	n := 0
	for {
		var k int
		var rerr error
		if n < len(buf) {
			k, rerr = nc.Read(buf[n:])
			n += k
		} else {
			_, rerr = nc.Read(rest) // keep the start, read on to the close
		}
		if rerr != nil {
			res.Err = rerr
			break
		}
	}
	res.Reply = buf[:n]
	res.Closed = errors.Is(res.Err, io.EOF) || errors.Is(res.Err, syscall.ECONNRESET)
	_ = nc.Close() // ends a Tail still being written
	<-wrote
	return res, nil
}

// Summary is the reply in one line: an HTTP status line and body, or the
// printable runs of a Thrift exception (inflated first if it came over
// TZlibTransport).
func (r HostileResult) Summary() string {
	s := string(r.Reply)
	if wire.IsZlibStart(r.Reply) {
		if zr, err := zlib.NewReader(bytes.NewReader(r.Reply)); err == nil {
			b, _ := io.ReadAll(io.LimitReader(zr, 64<<10)) // a stream cut by the close ends in an error
			s = string(b)
		}
	}
	if strings.HasPrefix(s, "HTTP/") {
		status, _, _ := strings.Cut(s, "\r\n")
		_, body, _ := strings.Cut(s, "\r\n\r\n")
		return status + ": " + strings.TrimSpace(body)
	}
	var words []string
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r < ' ' || r > '~' }) {
		if len(w) > 3 {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		return fmt.Sprintf("%d bytes", len(r.Reply))
	}
	return strings.Join(words, " ")
}
