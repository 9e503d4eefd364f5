package client

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMethodCacheHot: the direct-mapped front of the method cache only
// ever answers with the info of the Method asked for, whatever collides
// in its slots (more Methods than slots, asked in turn and concurrently);
// prepare runs once per Method; past maxMethodInfos the cache answers
// nil, and keeps answering for the Methods it holds.
func TestMethodCacheHot(t *testing.T) {
	var mc methodCache
	var prepared atomic.Int64
	prepare := func(m *Method) *Method {
		prepared.Add(1)
		return &Method{Service: m.Service, Name: m.Name + "'"}
	}
	ms := make([]*Method, 3*hotMethods)
	for i := range ms {
		ms[i] = &Method{Service: "S", Name: fmt.Sprint("f", i)}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 200 {
				m := ms[(r*7+g)%len(ms)]
				mi := mc.get(m, prepare)
				if mi == nil || mi.key != m || mi.m.Name != m.Name+"'" {
					t.Errorf("get(%s) = %+v", m.Name, mi)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, m := range ms {
		mi := mc.get(m, prepare)
		require.NotNil(t, mi)
		require.Same(t, m, mi.key)
		require.Equal(t, m.Name+"'", mi.m.Name)
		require.Same(t, mi, mc.get(m, prepare), "a second get answers from the same info")
	}
	require.Equal(t, int64(len(ms)), prepared.Load(), "prepare once per Method")

	for i := len(ms); i < maxMethodInfos; i++ {
		require.NotNil(t, mc.get(&Method{Service: "S", Name: fmt.Sprint("g", i)}, prepare))
	}
	require.Nil(t, mc.get(&Method{Service: "S", Name: "over"}, prepare), "no room past maxMethodInfos")
	for _, m := range ms {
		require.Same(t, m, mc.get(m, prepare).key)
	}
}
