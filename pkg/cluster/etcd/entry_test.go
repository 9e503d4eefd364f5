package etcd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeEntry(t *testing.T) {
	for _, tc := range []struct {
		in, addr, err string
	}{
		{in: `{"Op":0,"Addr":"10.0.0.1:9090","Metadata":null}`, addr: "10.0.0.1:9090"},
		{in: `{"Addr":"[::1]:9090","Metadata":{"weight":3}}`, addr: "[::1]:9090"},
		{in: `{"addr":"kv-1.internal:9090"}`, addr: "kv-1.internal:9090"}, // encoding/json matches names without case
		{in: `{"Op":1,"Addr":"10.0.0.1:9090"}`, addr: "10.0.0.1:9090"},    // Op is ignored, as etcd's reader does
		{in: `hello`, err: `not an endpoint (JSON {"Addr": "host:port"}): invalid character 'h' looking for beginning of value`},
		{in: ``, err: `not an endpoint (JSON {"Addr": "host:port"}): unexpected end of JSON input`},
		{in: `[1]`, err: `not an endpoint (JSON {"Addr": "host:port"}): json: cannot unmarshal array into Go value of type etcd.entry`},
		{in: `{"Addr":9090}`, err: `not an endpoint (JSON {"Addr": "host:port"}): json: cannot unmarshal number into Go struct field entry.Addr of type string`},
		{in: `null`, err: `etcd: not a dialable host:port: no address`},
		{in: `{}`, err: `etcd: not a dialable host:port: no address`},
		{in: `{"Addr":"10.0.0.1"}`, err: `etcd: not a dialable host:port: address 10.0.0.1: missing port in address`},
		{in: `{"Addr":":9090"}`, err: `etcd: not a dialable host:port: ":9090" has no host`},
		{in: `{"Addr":"0.0.0.0:9090"}`, err: `etcd: not a dialable host:port: "0.0.0.0:9090" has the unspecified host 0.0.0.0 (listening on all interfaces), which names no server to its clients`},
		{in: `{"Addr":"h:0"}`, err: `etcd: not a dialable host:port: "h:0" has port "0", not a number from 1 to 65535`},
		{in: `{"Addr":"h:65536"}`, err: `etcd: not a dialable host:port: "h:65536" has port "65536", not a number from 1 to 65535`},
		{in: `{"Addr":"h:http"}`, err: `etcd: not a dialable host:port: "h:http" has port "http", not a number from 1 to 65535`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			addr, err := decodeEntry([]byte(tc.in))
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.addr, addr)
		})
	}
}

// FuzzDecodeEntry: any value read from etcd gives an address that
// passes checkAddr or an error, never a panic.
func FuzzDecodeEntry(f *testing.F) {
	for _, s := range []string{
		`{"Op":0,"Addr":"10.0.0.1:9090","Metadata":null}`,
		`{"Addr":"[::1]:9090","Metadata":{"weight":3,"transport":"shm"}}`,
		`{"Addr":"[fe80::1%eth0]:1"}`,
		`{"Addr":"0.0.0.0:9090"}`,
		`{"Addr":"h:65536"}`,
		`{"Addr":""}`,
		`null`, `[]`, `"x"`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		addr, err := decodeEntry(v)
		if err == nil {
			require.NoError(t, checkAddr(addr))
		} else {
			require.Empty(t, addr)
		}
	})
}
