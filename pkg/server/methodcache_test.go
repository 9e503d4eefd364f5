package server

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

func cacheTestService(name string, fns ...string) *Service {
	svc := &Service{Name: name}
	for _, fn := range fns {
		svc.Methods = append(svc.Methods, Method{
			Name:    fn,
			NewArgs: func() proto.Struct { return nil },
			Handle:  func(context.Context, proto.Struct) (proto.Struct, error) { return nil, nil },
		})
	}
	return svc
}

// A connection's method cache answers what the table would, call after
// call: a name of the same length as the cached one is not taken for it,
// an unknown name is not cached, and a method registered after the first
// lookup is found (the table changed).
func TestMethodCache(t *testing.T) {
	s := New()
	t.Cleanup(func() { _ = s.Close() })
	s.Register(cacheTestService("Echo", "echo", "ping"))
	var mc methodCache
	steps := []struct {
		name     string
		register *Service // registered before this step
	}{
		{name: "echo"},
		{name: "echo"},
		{name: "Echo:echo"},
		{name: "ping"}, // same length as "echo"
		{name: "nope"},
		{name: "echo"},
		{name: "Other:echo", register: cacheTestService("Other", "echo", "late")},
		{name: "late"},
		{name: "echo"},
	}
	for i, st := range steps {
		if st.register != nil {
			s.Register(st.register)
		}
		want := s.lookup([]byte(st.name))
		got := mc.find(s, []byte(st.name))
		assert.Same(t, want, got, "step %d: %s", i, st.name)
		if want != nil {
			require.Equal(t, st.name, string(mc.name), "step %d: found is cached", i)
			assert.Same(t, want, mc.m)
		} else {
			assert.NotEqual(t, st.name, string(mc.name), "step %d: unknown is not cached", i)
		}
	}
	assert.Nil(t, mc.find(s, []byte("Other:nope")))
	assert.NotNil(t, s.lookup([]byte("late")), "the late method is in the table")
}

// The name's bytes are copied: a request buffer reused for the next
// request cannot change what the cache matches.
func TestMethodCacheCopiesName(t *testing.T) {
	s := New()
	t.Cleanup(func() { _ = s.Close() })
	s.Register(cacheTestService("Echo", "echo", "ping"))
	var mc methodCache
	buf := []byte("echo")
	require.NotNil(t, mc.find(s, buf))
	copy(buf, "ping")
	assert.Same(t, s.lookup([]byte("ping")), mc.find(s, buf))
}
