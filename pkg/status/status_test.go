package status_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/status"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
)

type connErr struct{}

func (connErr) Error() string          { return "connection reset" }
func (connErr) StatusCode() codes.Code { return codes.Unavailable }

func TestCode(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"nil", nil, codes.OK},
		{"status", status.Error(codes.NotFound, "x"), codes.NotFound},
		{"wrapped status", fmt.Errorf("get: %w", status.Error(codes.Aborted, "x")), codes.Aborted},
		{"user code", status.Error(codes.User+3, "x"), codes.User + 3},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{"canceled", context.Canceled, codes.Canceled},
		{"overload", proto.ErrOverloaded, codes.ResourceExhausted},
		{"unknown exc", proto.NewApplicationException(proto.ExcUnknown, "x"), codes.Unknown},
		{"unknown method", proto.NewApplicationException(proto.ExcUnknownMethod, "x"), codes.Unimplemented},
		{"validation", proto.NewApplicationException(proto.ExcValidationFailed, "x"), codes.InvalidArgument},
		{"internal exc", proto.NewApplicationException(proto.ExcInternalError, "x"), codes.Internal},
		{"protocol exc", proto.NewApplicationException(proto.ExcProtocolError, "x"), codes.Internal},
		{"transport", fmt.Errorf("call: %w", connErr{}), codes.Unavailable},
		{"plain", errors.New("x"), codes.Unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, status.Code(tc.err)) })
	}
}

func TestCodeNamesAndLabels(t *testing.T) {
	cases := []struct {
		c           codes.Code
		name, label string
		retryable   bool
	}{
		{codes.OK, "OK", "ok", false},
		{codes.DeadlineExceeded, "DeadlineExceeded", "deadline", false},
		{codes.ResourceExhausted, "ResourceExhausted", "overload", false},
		{codes.Internal, "Internal", "internal_error", false},
		{codes.Unavailable, "Unavailable", "unavailable", true},
		{codes.Unauthenticated, "Unauthenticated", "unauthenticated", false},
		{codes.Code(17), "Code(17)", "unknown_code", false},
		{codes.User, "User(1000)", "user_code", false},
		{codes.User + 99, "User(1099)", "user_code", false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.name, tc.c.String())
		assert.Equal(t, tc.label, tc.c.Label())
		assert.Equal(t, tc.retryable, tc.c.Retryable())
	}
}

func TestStatusValue(t *testing.T) {
	base := status.New(codes.NotFound, "no user")
	st := base.WithDetails("user", "u1", "dangling")
	assert.Nil(t, base.Details(), "WithDetails leaves the original alone")
	assert.Equal(t, map[string]string{"user": "u1"}, st.Details())
	assert.Equal(t, "u1", st.Detail("user"))
	st.Details()["user"] = "changed"
	assert.Equal(t, "u1", st.Detail("user"), "Details is a copy")
	assert.EqualError(t, st, "status NotFound: no user")
	assert.ErrorIs(t, fmt.Errorf("wrap: %w", st), status.Error(codes.NotFound, ""))
	assert.NotErrorIs(t, st, status.Error(codes.NotFound, "other"))
	assert.NotErrorIs(t, st, status.Error(codes.Internal, ""))
	assert.NoError(t, status.Error(codes.OK, "fine"))
	assert.NoError(t, status.New(codes.OK, "").Err())
	var nilStatus *status.Status
	assert.NoError(t, nilStatus.Err())
	assert.Equal(t, codes.OK, nilStatus.Code())
	assert.EqualError(t, status.Errorf(codes.InvalidArgument, "bad %s", "key"), "status InvalidArgument: bad key")

	got, ok := status.FromError(fmt.Errorf("w: %w", st))
	require.True(t, ok)
	assert.Same(t, st, got)
	_, ok = status.FromError(errors.New("x"))
	assert.False(t, ok)
	assert.Nil(t, status.Convert(nil))
	c := status.Convert(proto.NewApplicationException(proto.ExcUnknownMethod, "unknown method x"))
	assert.Equal(t, codes.Unimplemented, c.Code())
	assert.Equal(t, "unknown method x", c.Message())
	assert.Equal(t, "boom", status.Convert(errors.New("boom")).Message())
}

// A status goes out as an exception plus headers and comes back equal.
func TestStatusRoundTrip(t *testing.T) {
	cases := []struct {
		st      *status.Status
		excType int32
	}{
		{status.New(codes.NotFound, "no user").WithDetails("user", "u1", "shard", "3"), proto.ExcInternalError},
		{status.New(codes.Unknown, "?"), proto.ExcUnknown},
		{status.New(codes.Unimplemented, "later"), proto.ExcUnknownMethod},
		{status.New(codes.InvalidArgument, "bad"), proto.ExcValidationFailed},
		{status.New(codes.User+5, "biz"), proto.ExcInternalError},
	}
	for _, tc := range cases {
		ae := tc.st.Exception()
		assert.Equal(t, tc.excType, ae.Type)
		assert.Equal(t, tc.st.Message(), ae.Message)
		md := tc.st.AppendHeaders(metadata.MD{"other": "kept"})
		assert.Equal(t, "kept", md["other"])
		got := status.FromReply(ae, md)
		require.NotNil(t, got)
		assert.Equal(t, tc.st.Code(), got.Code())
		assert.Equal(t, tc.st.Message(), got.Message())
		assert.Equal(t, tc.st.Details(), got.Details())
		var back *proto.ApplicationException
		require.ErrorAs(t, got, &back)
		assert.Same(t, ae, back)
		assert.Same(t, ae, got.Exception(), "the exception it came in goes on as it is")
	}
	assert.Nil(t, status.FromReply(proto.NewApplicationException(proto.ExcInternalError, "x"), nil))
	assert.Nil(t, status.FromReply(proto.NewApplicationException(proto.ExcInternalError, "x"),
		metadata.MD{status.HeaderCode: "nope"}), "a code that is not a number is not a status")
}

func TestDetailsTooLarge(t *testing.T) {
	big := make([]byte, status.MaxDetailBytes)
	md := status.New(codes.Aborted, "x").WithDetails("blob", string(big)).AppendHeaders(nil)
	assert.Equal(t, metadata.MD{status.HeaderCode: "10"}, md, "the code goes without the details")
}

func TestOutcomeLabel(t *testing.T) {
	assert.Equal(t, "not_found", proto.Outcome(nil, fmt.Errorf("w: %w", status.Error(codes.NotFound, "x"))))
	assert.Equal(t, "user_code", proto.Outcome(nil, status.Error(codes.User+1, "x")))
	assert.Empty(t, proto.Outcome(nil, errors.New("plain")), "left to the caller to classify")
}

// FromReply reads headers a peer sent: whatever they hold, it returns a
// status or nil, never panics.
func FuzzFromReply(f *testing.F) {
	f.Add("5", "hatrpc-status-user", "u1", "msg")
	f.Add("4294967296", "hatrpc-status-", "", "")
	f.Add("-1", "x", "y", "z")
	f.Fuzz(func(t *testing.T, code, k, v, msg string) {
		ae := proto.NewApplicationException(proto.ExcInternalError, msg)
		st := status.FromReply(ae, metadata.MD{status.HeaderCode: code, k: v})
		if st == nil {
			return
		}
		assert.Equal(t, msg, st.Message())
		for dk := range st.Details() {
			assert.NotEmpty(t, dk)
		}
	})
}
