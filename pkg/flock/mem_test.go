package flock

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMemoryOpsConcurrent(t *testing.T) {
	const g, n = 32, 50
	d := openDev(t)
	s := newServer(t, d)
	mr, err := s.AttachRegion(8192)
	require.NoError(t, err)
	c, _ := dial(t, d, s, WithQPs(2))
	regs := c.Regions()
	require.Len(t, regs, 1)
	r := regs[0]
	ctx := tctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, g)
	olds := make([][]uint64, g)
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c.NewCaller()
			slot := uint64(64 + i*64)
			for k := 0; k < n; k++ {
				old, err := cl.FetchAdd(ctx, r, 0, 1)
				if err != nil {
					errs <- err
					return
				}
				olds[i] = append(olds[i], old)
				for { // increment word 8 with compare-and-swap
					var cur [8]byte
					if err := cl.Read(ctx, r, 8, cur[:]); err != nil {
						errs <- err
						return
					}
					v := binary.LittleEndian.Uint64(cur[:])
					got, err := cl.CompareSwap(ctx, r, 8, v, v+1)
					if err != nil {
						errs <- err
						return
					}
					if got == v {
						break
					}
				}
				want := bytes.Repeat([]byte{byte(i), byte(k)}, 32)
				if err := cl.Write(ctx, r, slot, want); err != nil {
					errs <- err
					return
				}
				back := make([]byte, 64)
				if err := cl.Read(ctx, r, slot, back); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(want, back) {
					errs <- fmt.Errorf("caller %d: read back %x", i, back[:4])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	b := mr.Bytes()
	require.Equal(t, uint64(g*n), binary.LittleEndian.Uint64(b[0:]))
	require.Equal(t, uint64(g*n), binary.LittleEndian.Uint64(b[8:]))
	seen := make(map[uint64]bool, g*n)
	for _, os := range olds {
		for _, o := range os {
			require.False(t, seen[o], "fetch-add returned %d twice", o)
			seen[o] = true
		}
	}
	for i := 0; i < g; i++ {
		require.Equal(t, bytes.Repeat([]byte{byte(i), byte(n - 1)}, 32), b[64+i*64:128+i*64])
	}
}

func TestMemoryOpErrors(t *testing.T) {
	d := openDev(t)
	s := newServer(t, d)
	_, err := s.AttachRegion(64)
	require.NoError(t, err)
	c, _ := dial(t, d, s, WithMaxMemOp(64))
	r := c.Regions()[0]
	ctx := tctx(t)
	tests := []struct {
		name string
		op   func() error
		want error
	}{
		{"read past end", func() error { return c.Read(ctx, r, 60, make([]byte, 8)) }, ErrBadRegion},
		{"write past end", func() error { return c.Write(ctx, r, 64, []byte{1}) }, ErrBadRegion},
		{"misaligned atomic", func() error { _, err := c.FetchAdd(ctx, r, 4, 1); return err }, ErrBadRegion},
		{"atomic past end", func() error { _, err := c.CompareSwap(ctx, r, 64, 0, 1); return err }, ErrBadRegion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { require.ErrorIs(t, tc.op(), tc.want) })
	}
	require.NoError(t, c.Write(ctx, r, 0, bytes.Repeat([]byte{7}, 64)))
	got := make([]byte, 64)
	require.NoError(t, c.Read(ctx, r, 0, got))
	require.Equal(t, bytes.Repeat([]byte{7}, 64), got)
}
