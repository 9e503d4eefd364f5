package proto_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

type thrown string

func (thrown) EncodeBinary(*proto.BinaryWriter) error   { return nil }
func (thrown) DecodeBinary(*proto.BinaryReader) error   { return nil }
func (thrown) EncodeCompact(*proto.CompactWriter) error { return nil }
func (thrown) DecodeCompact(*proto.CompactReader) error { return nil }
func (t thrown) ThrownException() string                { return string(t) }

func TestOutcome(t *testing.T) {
	tests := []struct {
		name string
		res  proto.Struct
		err  error
		want string
	}{
		{"ok", nil, nil, proto.OutcomeOK},
		{"result without exceptions", &proto.ApplicationException{}, nil, proto.OutcomeOK},
		{"result carrying none", thrown(""), nil, proto.OutcomeOK},
		{"declared exception", thrown("NotFound"), nil, "NotFound"},
		{"overload", nil, proto.ErrOverloaded, proto.OutcomeOverload},
		{"overload, wrapped", nil, fmt.Errorf("call: %w", proto.ErrOverloaded), proto.OutcomeOverload},
		{"overload as decoded off the wire", nil, proto.NewApplicationException(proto.ExcInternalError, "overloaded: rate limit exceeded; retry later"), proto.OutcomeOverload},
		{"deadline", nil, fmt.Errorf("x: %w", context.DeadlineExceeded), proto.OutcomeDeadline},
		{"canceled", nil, context.Canceled, proto.OutcomeCanceled},
		{"internal error", nil, proto.NewApplicationException(proto.ExcInternalError, "boom"), "internal_error"},
		{"unknown method", nil, proto.NewApplicationException(proto.ExcUnknownMethod, ""), "unknown_method"},
		{"validation failed", nil, proto.NewApplicationException(proto.ExcValidationFailed, ""), "validation_failed"},
		{"type beyond Apache's", nil, proto.NewApplicationException(99, ""), "application_error"},
		{"other error", nil, errors.New("dial refused"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, proto.Outcome(tt.res, tt.err))
		})
	}
}
