package wire

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// blobs is a struct of binary fields, some large enough to become refs.
type blobs [][]byte

func (b blobs) enc(w interface {
	WriteStructBegin()
	WriteFieldBegin(t proto.Type, id int16)
	WriteBinary(v []byte)
	WriteFieldStop()
	WriteStructEnd()
}) error {
	w.WriteStructBegin()
	for i, v := range b {
		w.WriteFieldBegin(proto.STRING, int16(i+1))
		w.WriteBinary(v)
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (b blobs) EncodeBinary(w *proto.BinaryWriter) error   { return b.enc(w) }
func (b blobs) EncodeCompact(w *proto.CompactWriter) error { return b.enc(w) }
func (b blobs) DecodeBinary(r *proto.BinaryReader) error   { return r.Skip(proto.STRUCT) }
func (b blobs) DecodeCompact(r *proto.CompactReader) error { return r.Skip(proto.STRUCT) }

// frameOf encodes body as a HatRPC call frame, with refs or copied.
func frameOf(t testing.TB, p proto.Protocol, seq int32, body proto.Struct, withRefs bool) ([]byte, []proto.Ref, *Codec) {
	c := GetCodec()
	b := make([]byte, HeaderSize)
	var (
		refs []proto.Ref
		err  error
	)
	if withRefs {
		b, refs, err = c.AppendMessageRefs(b, p, "m", proto.Call, seq, body)
	} else {
		b, err = c.AppendMessage(b, p, "m", proto.Call, seq, body)
	}
	require.NoError(t, err)
	SealFrameRefs(b, refs, KindCall, 0, seq, 0)
	return b, refs, c
}

// loopback returns both ends of a TCP connection (writev is only used on
// a real socket).
func loopback(t *testing.T) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	a, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	require.NoError(t, err)
	select {
	case b := <-acc:
		require.NotNil(t, b)
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, b
	case <-time.After(5 * time.Second):
		t.Fatal("accept timed out")
		return nil, nil
	}
}

func TestAppendMessageRefsMatchesAppendMessage(t *testing.T) {
	large := bytes.Repeat([]byte("L"), RefMin)
	tests := []struct {
		name     string
		body     blobs
		wantRefs int
	}{
		{"small only", blobs{[]byte("a"), make([]byte, RefMin-1)}, 0},
		{"one large", blobs{[]byte("a"), large, []byte("z")}, 1},
		{"two large", blobs{large, large}, 2},
	}
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		for _, tt := range tests {
			t.Run(fmt.Sprint(p, "/", tt.name), func(t *testing.T) {
				plain, _, c1 := frameOf(t, p, 7, tt.body, false)
				defer PutCodec(c1)
				head, refs, c2 := frameOf(t, p, 7, tt.body, true)
				require.Len(t, refs, tt.wantRefs)
				var sink bytes.Buffer
				w := NewWriter(&sink, nil)
				require.NoError(t, w.WriteVec(head, refs))
				PutCodec(c2)
				assert.Equal(t, plain, sink.Bytes())
			})
		}
	}
}

func TestWriteVecKeepsFramesWholeAmongWrites(t *testing.T) {
	// Vectored frames and small coalesced ones from many goroutines, over
	// a real socket (writev) and a plain io.Writer (one Write per piece):
	// the reader must see every frame whole and in per-goroutine order.
	large := bytes.Repeat([]byte("V"), 100<<10)
	sinks := map[string]func(t *testing.T) (io.Writer, io.Reader){
		"tcp": func(t *testing.T) (io.Writer, io.Reader) { a, b := loopback(t); return a, b },
		"pipe": func(t *testing.T) (io.Writer, io.Reader) {
			r, w := io.Pipe()
			t.Cleanup(func() { r.Close(); w.Close() })
			return w, r
		},
	}
	for name, mk := range sinks {
		t.Run(name, func(t *testing.T) {
			out, in := mk(t)
			w := NewWriter(out, nil)
			const goroutines, per = 6, 20
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range per {
						seq := int32(g*1000 + i)
						body := blobs{[]byte(fmt.Sprint(seq))}
						if (g+i)%2 == 0 {
							body = append(body, large)
						}
						head, refs, c := frameOf(t, proto.Binary, seq, body, true)
						assert.NoError(t, w.WriteVec(head, refs))
						PutCodec(c)
					}
				}()
			}
			br := bufio.NewReader(in)
			next := make([]int32, goroutines)
			done := make(chan error, 1)
			go func() {
				for range goroutines * per {
					h, buf, err := ReadFrame(br, nil, 1<<20)
					if err != nil {
						done <- err
						return
					}
					g, i := h.Seqid/1000, h.Seqid%1000
					if i != next[g] {
						done <- fmt.Errorf("goroutine %d: frame %d, want %d", g, i, next[g])
						return
					}
					next[g]++
					mh, err := ParseMsgHeader(proto.Binary, buf[HeaderSize:])
					if err == nil && mh.Seqid != h.Seqid {
						err = fmt.Errorf("message seqid %d in frame %d", mh.Seqid, h.Seqid)
					}
					if err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("frames did not arrive")
			}
			wg.Wait()
		})
	}
}

func TestWriteVecStickyError(t *testing.T) {
	w := NewWriter(failWriter{}, nil)
	head, refs, c := frameOf(t, proto.Binary, 1, blobs{bytes.Repeat([]byte("x"), RefMin)}, true)
	defer PutCodec(c)
	require.Len(t, refs, 1)
	require.ErrorIs(t, w.WriteVec(head, refs), io.ErrClosedPipe)
	require.ErrorIs(t, w.Write([]byte("later")), io.ErrClosedPipe)
	require.ErrorIs(t, w.WriteVec(head, refs), io.ErrClosedPipe)
}

func TestBigFramesQueuedBehindAWriteGoOutTogether(t *testing.T) {
	// Big frames (copied Write from 64 KiB, and WriteVec) arriving while
	// another goroutine writes are sent by that goroutine in one vectored
	// write, not one turn each, and every frame stays whole.
	sink := &syncBuf{}
	w := NewWriter(sink, nil)
	const goroutines, per = 8, 10
	big := bytes.Repeat([]byte("B"), bigFrame)
	large := bytes.Repeat([]byte("R"), RefMin)
	before := WriteSyscalls.Load()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				tag := fmt.Appendf(nil, "<%d:%02d>", g, i)
				if i%2 == 0 {
					assert.NoError(t, w.Write(append(append([]byte(nil), tag...), big...)))
					continue
				}
				head, refs, c := frameOf(t, proto.Binary, int32(g*100+i), blobs{tag, large}, true)
				assert.NoError(t, w.WriteVec(head, refs))
				PutCodec(c)
			}
		}()
	}
	wg.Wait()
	w.Wait()
	rounds := WriteSyscalls.Load() - before
	assert.Less(t, rounds, int64(goroutines*per), "queued big frames were batched")
	out := sink.b.Bytes()
	for g := range goroutines {
		last := -1
		for i := range per {
			idx := bytes.Index(out, fmt.Appendf(nil, "<%d:%02d>", g, i))
			require.Greater(t, idx, last, "frames of one goroutine arrive in order")
			last = idx
			if i%2 == 0 {
				require.True(t, bytes.HasPrefix(out[idx+len(fmt.Sprintf("<%d:%02d>", g, i)):], big), "copied frame whole")
			}
		}
	}
}
