package server

import "github.com/hatrpc/hatrpc/pkg/wire"

// kit is what one goroutine's turn at serving a connection (a call to
// serve) reuses from call to call instead of taking it from the pools
// for each: a codec, and the request of the call it ran last.
type kit struct {
	codec *wire.Codec
	req   *request
}

func (k *kit) getCodec() *wire.Codec {
	if k.codec == nil {
		k.codec = wire.GetCodec()
	}
	return k.codec
}

// take returns a request to fill in.
func (k *kit) take() *request {
	if r := k.req; r != nil {
		k.req = nil
		return r
	}
	return reqPool.Get().(*request)
}

// keep takes back r, cleared, for the next call.
func (k *kit) keep(r *request) {
	if k.req == nil {
		k.req = r
		return
	}
	reqPool.Put(r)
}

func (k *kit) done() {
	if k.codec != nil {
		wire.PutCodec(k.codec)
	}
	if k.req != nil {
		reqPool.Put(k.req)
	}
	*k = kit{}
}
