package etcd

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrBadAddress says an address is not one a client can dial: not
// host:port, an empty or unspecified host, or a port outside 1..65535.
var ErrBadAddress = errors.New("etcd: not a dialable host:port")

// entry is the value of a key: etcd's naming/endpoints format (its
// internal.Update, a superset of gRPC's old naming.Update). Op is always
// 0 (add) in what endpoints.Manager writes and is ignored, as etcd's own
// reader ignores it; Metadata is not read here.
type entry struct {
	Addr string
}

// decodeEntry returns the address an entry names.
func decodeEntry(v []byte) (string, error) {
	var e entry
	if err := json.Unmarshal(v, &e); err != nil {
		return "", fmt.Errorf("not an endpoint (JSON {\"Addr\": \"host:port\"}): %w", err)
	}
	if err := checkAddr(e.Addr); err != nil {
		return "", err
	}
	return e.Addr, nil
}

func checkAddr(addr string) error {
	if addr == "" {
		return fmt.Errorf("%w: no address", ErrBadAddress)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadAddress, err)
	}
	if host == "" {
		return fmt.Errorf("%w: %q has no host", ErrBadAddress, addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%w: %q has the unspecified host %s (listening on all interfaces), which names no server to its clients", ErrBadAddress, addr, host)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("%w: %q has port %q, not a number from 1 to 65535", ErrBadAddress, addr, port)
	}
	return nil
}

// checkArgs checks what both constructors take.
func checkArgs(fn string, cli *clientv3.Client, service string) error {
	if cli == nil {
		return fmt.Errorf("etcd: %s: nil etcd client", fn)
	}
	if service == "" {
		return fmt.Errorf("etcd: %s: empty service name", fn)
	}
	return nil
}

// badKeys logs each key whose entry is garbage once, until the key is
// deleted or holds an endpoint again: a bad entry left in etcd would
// otherwise be logged at every change under the prefix.
type badKeys struct {
	log *slog.Logger
	mu  sync.Mutex
	set map[string]struct{}
}

func (b *badKeys) skip(key string, err error) {
	b.mu.Lock()
	_, known := b.set[key]
	if !known {
		if b.set == nil {
			b.set = map[string]struct{}{}
		}
		b.set[key] = struct{}{}
	}
	b.mu.Unlock()
	if !known {
		b.log.Warn("etcd: skipping an entry that names no server", "key", key, "err", err)
	}
}

func (b *badKeys) forget(key string) {
	b.mu.Lock()
	delete(b.set, key)
	b.mu.Unlock()
}

// keepOnly forgets the keys a full listing no longer shows as bad.
func (b *badKeys) keepOnly(bad map[string]struct{}) {
	b.mu.Lock()
	for k := range b.set {
		if _, ok := bad[k]; !ok {
			delete(b.set, k)
		}
	}
	b.mu.Unlock()
}
