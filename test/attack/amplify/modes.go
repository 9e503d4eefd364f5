package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"time"

	gen "github.com/hatrpc/hatrpc/internal/hatkv/gen/hatkv"
	"github.com/hatrpc/hatrpc/pkg/fb303/gen/fb303"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

var attacks = map[string]attack{
	"bigscan":   bigScan,
	"theader":   theaderInfo,
	"hdrblock":  headerBlock,
	"oneway":    onewayFlood,
	"silent":    silentConns,
	"guess":     tokenGuess,
	"lanebatch": laneBatch,
}

// message appends one binary Thrift message (no frame length).
func message(out []byte, name string, typ proto.MessageType, seq int32, args proto.Struct) []byte {
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	out, err := codec.AppendMessage(out, proto.Binary, name, typ, seq, args)
	if err != nil {
		panic(err) // the probe's own fixed arguments
	}
	return out
}

// framed appends one framed binary message.
func framed(out []byte, name string, typ proto.MessageType, seq int32, args proto.Struct) []byte {
	at := len(out)
	out = message(append(out, 0, 0, 0, 0), name, typ, seq, args)
	binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-4))
	return out
}

// spray writes the same bytes on n fresh connections, once each.
func spray(c config, track func(net.Conn), n int, prep func(net.Conn) error, out []byte) (func() string, error) {
	for range n {
		nc, err := dialRaw(c.addr)
		if err != nil {
			return nil, err
		}
		track(nc)
		if prep != nil {
			if err := prep(nc); err != nil {
				return nil, err
			}
		}
		go func() { _, _ = nc.Write(out) }()
	}
	return nil, nil
}

// bigScan is D2: Scans whose reply (about 100 MB of zbig* records) is
// over the 64 MiB message limit, pipelined, replies never read.
func bigScan(c config, track func(net.Conn), _ <-chan struct{}) (func() string, error) {
	var out []byte
	for i := range max(c.calls, 1) {
		out = framed(out, "Scan", proto.Call, int32(i+1), &gen.HatKVScanArgs{StartKey: bigPrefix, Count: 10000})
	}
	return spray(c, track, max(c.conns, 1), nil, out)
}

// theaderPairs is the most empty info pairs (2 bytes each) a THeader
// header of at most 65,535 words holds.
const theaderPairs = 131062

// theaderInfo is D3: THeader frames of 256 KiB whose header is one info
// list of 131,062 empty pairs, each carrying a Get.
func theaderInfo(c config, track func(net.Conn), _ <-chan struct{}) (func() string, error) {
	calls := c.calls
	if calls == 0 {
		calls = 200
	}
	var out []byte
	for i := range calls {
		at := len(out)
		out = append(out, 0, 0, 0, 0) // frame length
		out = binary.BigEndian.AppendUint16(out, wire.THeaderMagic)
		out = binary.BigEndian.AppendUint16(out, 0)
		out = binary.BigEndian.AppendUint32(out, uint32(i+1))
		words := len(out)
		out = append(out, 0, 0, 0, 0, 1) // header words (below), binary, no transforms, key/value info
		hs := len(out) - 3
		out = binary.AppendUvarint(out, theaderPairs)
		out = append(out, make([]byte, 2*theaderPairs)...)
		for (len(out)-hs)%4 != 0 {
			out = append(out, 0)
		}
		binary.BigEndian.PutUint16(out[words:], uint16((len(out)-hs)/4))
		out = message(out, "Get", proto.Call, int32(i+1), &gen.HatKVGetArgs{Key: "user000001"})
		binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-4))
	}
	return spray(c, track, max(c.conns, 1), nil, out)
}

// handshake upgrades nc to HatRPC framing with header blocks, as a
// HatRPC client does.
func handshake(nc net.Conn) error {
	msg, err := proto.EncodeFramedMessage(proto.Binary, nil, wire.HelloMethod, proto.Call, 1,
		&wire.Hello{Version: wire.Version, Caps: wire.CapFraming | wire.CapHeaders, MaxFrame: 64 << 20})
	if err != nil {
		return err
	}
	if _, err := nc.Write(msg); err != nil {
		return err
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer func() { _ = nc.SetReadDeadline(time.Time{}) }()
	var n [4]byte
	if _, err := io.ReadFull(nc, n[:]); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(nc, body); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	var rep wire.HelloReply
	if _, err := proto.DecodeMessage(proto.Binary, body, nil, &rep); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	if rep.Caps&(wire.CapFraming|wire.CapHeaders) != wire.CapFraming|wire.CapHeaders {
		return fmt.Errorf("hello: the server granted caps %#x, not framing with headers", rep.Caps)
	}
	return nil
}

// block returns a header block of about size bytes: the empty
// pairs (two bytes each), or 1,024 pairs of distinct keys (the most one
// message may carry), each about size/1024 bytes.
func block(size int, pairs string) []byte {
	var kv []byte
	if pairs == "distinct" {
		const n = wire.MaxHeaders
		per := max(size/n-6, 10) // two strings and their lengths
		kv = binary.AppendUvarint(nil, n)
		for i := range n {
			k := fmt.Appendf(nil, "%04d", i)
			k = append(k, make([]byte, per/2-len(k))...)
			kv = binary.AppendUvarint(kv, uint64(len(k)))
			kv = append(kv, k...)
			kv = binary.AppendUvarint(kv, uint64(per-per/2))
			kv = append(kv, make([]byte, per-per/2)...)
		}
	} else {
		n := (size - 4 - binary.MaxVarintLen32) / 2
		kv = binary.AppendUvarint(nil, uint64(n))
		kv = append(kv, make([]byte, 2*n)...)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(kv))), kv...)
}

// headerBlock is D4: HatRPC Puts whose timeout (1 ns) has passed when
// they arrive, so each fails, each with a header block of c.block bytes.
func headerBlock(c config, track func(net.Conn), _ <-chan struct{}) (func() string, error) {
	calls := c.calls
	if calls == 0 {
		calls = 200
	}
	blk := block(c.block, c.pairs)
	var out []byte
	for i := range calls {
		at := len(out)
		out = append(out, make([]byte, wire.HeaderSize)...)
		out = append(out, blk...)
		out = message(out, "Put", proto.Call, int32(i+1), &gen.HatKVPutArgs{Key: "zattack", Fields: gen.Record{"f": []byte("v")}})
		wire.SealFrame(out[at:], wire.KindCall, wire.FlagHeaders, int32(i+1), time.Nanosecond)
	}
	return spray(c, track, max(c.conns, 1), handshake, out)
}

// onewayFlood is D5: fb303 shutdown and reinitialize, oneway, written as
// fast as the server reads them on c.conns connections (8 by default),
// each dialled again if the server closes it.
func onewayFlood(c config, track func(net.Conn), stop <-chan struct{}) (func() string, error) {
	var batch []byte
	for i := range 32 {
		batch = framed(batch, "shutdown", proto.Oneway, int32(2*i+1), &fb303.FacebookServiceShutdownArgs{})
		batch = framed(batch, "reinitialize", proto.Oneway, int32(2*i+2), &fb303.FacebookServiceReinitializeArgs{})
	}
	n := c.conns
	if n == 0 {
		n = 8
	}
	for range n {
		nc, err := dialRaw(c.addr)
		if err != nil {
			return nil, err
		}
		track(nc)
		go func() {
			for {
				if _, err := nc.Write(batch); err == nil {
					continue
				}
				select {
				case <-stop:
					return
				default:
				}
				if nc, err = dialRaw(c.addr); err != nil {
					return
				}
				track(nc)
			}
		}()
	}
	return nil, nil
}

// maxTimeout is D11: one Get in a HatRPC frame whose timeout is 2^63-1
// ns; it prints what came back and how long it took.
func maxTimeout(c config) error {
	nc, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := handshake(nc); err != nil {
		return err
	}
	f, err := wiretest.Frame(proto.Binary, wire.KindCall, proto.Call, "Get", 7, math.MaxInt64, nil, &gen.HatKVGetArgs{Key: "user000001"})
	if err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := nc.Write(f); err != nil {
		return err
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	hb := make([]byte, wire.HeaderSize)
	if _, err := io.ReadFull(br, hb); err != nil {
		return fmt.Errorf("reading the reply: %w", err)
	}
	h, err := wire.DecodeHeader(hb, 64<<20)
	if err != nil {
		return err
	}
	payload := make([]byte, h.PayloadLen())
	if _, err := io.ReadFull(br, payload); err != nil {
		return fmt.Errorf("reading the reply: %w", err)
	}
	if h.Flags&wire.FlagHeaders != 0 {
		n, err := wire.HeaderBlockLen(payload)
		if err != nil {
			return err
		}
		payload = payload[n:]
	}
	took := time.Since(t0)
	switch h.Kind {
	case wire.KindReply:
		var res gen.HatKVGetResult
		if _, err := proto.DecodeMessage(h.Protocol(), payload, nil, &res); err != nil {
			return err
		}
		fmt.Printf("timeout 2^63-1 ns: reply in %v, record of %d fields\n", took.Round(time.Microsecond), len(res.Success))
	case wire.KindException:
		var exc proto.ApplicationException
		if _, err := proto.DecodeMessage(h.Protocol(), payload, nil, &exc); err != nil {
			return err
		}
		fmt.Printf("timeout 2^63-1 ns: exception in %v: %s\n", took.Round(time.Microsecond), exc.Message)
	default:
		fmt.Printf("timeout 2^63-1 ns: frame kind %d in %v\n", h.Kind, took.Round(time.Microsecond))
	}
	return nil
}
