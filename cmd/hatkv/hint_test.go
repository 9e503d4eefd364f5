package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// The token hint is added where a missing token may be why the server
// closed the connection, not to a message over the size limit.
func TestClientErrorHint(t *testing.T) {
	const tokenHint = " (if the server requires a token, give --token or $HATKV_TOKEN)"
	closed := &client.ConnError{Op: "read", Err: errors.New("EOF")}
	tooLarge := &client.ConnError{Op: "read", Err: fmt.Errorf("%w: frame of 70000000 bytes", wire.ErrFrameTooLarge)}
	dial := &client.ConnError{Op: "dial", Err: errors.New("connection refused")}
	cases := []struct {
		name  string
		token string
		err   error
		hint  bool
	}{
		{"closed", "", closed, true},
		{"closed with token", "t", closed, false},
		{"too large", "", tooLarge, false},
		{"dial", "", dial, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &clientFlags{token: tc.token}
			got := c.hint(tc.err)
			want := tc.err.Error()
			if tc.hint {
				want += tokenHint
			}
			assert.EqualError(t, got, want)
			assert.ErrorIs(t, got, tc.err)
		})
	}
}
