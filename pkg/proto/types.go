package proto

import (
	"errors"
	"fmt"
	"strconv"
)

// Type is a Thrift wire type id.
type Type uint8

// Thrift wire type ids (identical to Apache Thrift's TType values).
const (
	STOP   Type = 0
	BOOL   Type = 2
	I8     Type = 3
	DOUBLE Type = 4
	I16    Type = 6
	I32    Type = 8
	I64    Type = 10
	STRING Type = 11
	STRUCT Type = 12
	MAP    Type = 13
	SET    Type = 14
	LIST   Type = 15
	UUID   Type = 16
)

var typeNames = [...]string{
	STOP: "STOP", BOOL: "BOOL", I8: "I8", DOUBLE: "DOUBLE", I16: "I16", I32: "I32",
	I64: "I64", STRING: "STRING", STRUCT: "STRUCT", MAP: "MAP", SET: "SET",
	LIST: "LIST", UUID: "UUID",
}

func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Valid reports whether t is a value type that may appear on the wire
// (STOP is not a value type).
func (t Type) Valid() bool {
	switch t {
	case BOOL, I8, DOUBLE, I16, I32, I64, STRING, STRUCT, MAP, SET, LIST, UUID:
		return true
	}
	return false
}

// MessageType is the kind of a Thrift message.
type MessageType uint8

// Thrift message types.
const (
	Call      MessageType = 1
	Reply     MessageType = 2
	Exception MessageType = 3
	Oneway    MessageType = 4
)

func (m MessageType) String() string {
	switch m {
	case Call:
		return "CALL"
	case Reply:
		return "REPLY"
	case Exception:
		return "EXCEPTION"
	case Oneway:
		return "ONEWAY"
	}
	return "MessageType(" + strconv.Itoa(int(m)) + ")"
}

// Protocol selects a wire encoding.
type Protocol uint8

// Supported protocols. The zero value is deliberately not a protocol so a
// forgotten field is caught as ErrBadProtocol rather than silently binary.
const (
	Binary  Protocol = 1
	Compact Protocol = 2
	// JSON is Apache's TJSONProtocol. It is encoded and decoded through
	// the binary protocol (see JSONCodec), so a Struct needs nothing more
	// than its binary methods.
	JSON Protocol = 3
)

func (p Protocol) String() string {
	switch p {
	case Binary:
		return "binary"
	case Compact:
		return "compact"
	case JSON:
		return "json"
	}
	return "Protocol(" + strconv.Itoa(int(p)) + ")"
}

// Struct is implemented by every generated struct (and ApplicationException).
type Struct interface {
	EncodeBinary(w *BinaryWriter) error
	DecodeBinary(r *BinaryReader) error
	EncodeCompact(w *CompactWriter) error
	DecodeCompact(r *CompactReader) error
}

// Limits bounds what a reader accepts so hostile input cannot make it
// allocate or recurse without bound.
type Limits struct {
	// MaxMessageSize bounds a whole message (frame payload or scanned
	// unframed message) in bytes.
	MaxMessageSize int
	// MaxDepth bounds struct/container nesting.
	MaxDepth int
	// MaxStringLength bounds one string or binary value in bytes.
	MaxStringLength int
	// MaxContainerSize bounds the element count of one list, set or map.
	MaxContainerSize int
}

// DefaultLimits are used when a nil *Limits is passed.
var DefaultLimits = Limits{
	MaxMessageSize:   64 << 20,
	MaxDepth:         64,
	MaxStringLength:  16 << 20,
	MaxContainerSize: 16 << 20,
}

func limitsOrDefault(l *Limits) *Limits {
	if l == nil {
		return &DefaultLimits
	}
	return l
}

// protoError is a sentinel that also matches ErrInvalidData, so callers can
// test for the coarse or the fine condition.
type protoError struct{ msg string }

func (e *protoError) Error() string { return e.msg }

func (e *protoError) Is(target error) bool { return target == ErrInvalidData }

// Decode error sentinels. Every decode failure matches ErrInvalidData.
var (
	ErrInvalidData        = errors.New("proto: invalid data")
	ErrTruncated    error = &protoError{"proto: truncated input"}
	ErrSizeLimit    error = &protoError{"proto: size limit exceeded"}
	ErrDepthLimit   error = &protoError{"proto: depth limit exceeded"}
	ErrBadVersion   error = &protoError{"proto: bad protocol version"}
	ErrBadType      error = &protoError{"proto: bad type id"}
	ErrNegativeSize error = &protoError{"proto: negative size"}
	// ErrJSONSyntax reports TJSONProtocol input that is not what Apache
	// writes: bad JSON, a bad escape or base64, a number out of range.
	ErrJSONSyntax error = &protoError{"proto: malformed TJSONProtocol"}
	// ErrBadProtocol reports an unknown Protocol value or undetectable
	// protocol bytes.
	ErrBadProtocol error = &protoError{"proto: unknown protocol"}
)

// DecodeError carries the position of a decode failure; it unwraps to one of
// the sentinels above.
type DecodeError struct {
	Err    error // one of the sentinels
	Pos    int   // byte offset in the input where decoding failed
	Detail string
}

func (e *DecodeError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%v at offset %d", e.Err, e.Pos)
	}
	return fmt.Sprintf("%v at offset %d: %s", e.Err, e.Pos, e.Detail)
}

func (e *DecodeError) Unwrap() error { return e.Err }

func decodeErr(sentinel error, pos int, detail string) error {
	return &DecodeError{Err: sentinel, Pos: pos, Detail: detail}
}

// RequiredFieldError reports a required field missing on decode or unset on
// encode; it matches ErrRequiredField and ErrInvalidData.
type RequiredFieldErr struct {
	Struct, Field string
}

// ErrRequiredField matches every RequiredFieldErr.
var ErrRequiredField error = &protoError{"proto: required field missing"}

func (e *RequiredFieldErr) Error() string {
	return "proto: required field " + e.Struct + "." + e.Field + " is not set"
}

func (e *RequiredFieldErr) Unwrap() error { return ErrRequiredField }

// RequiredFieldError is what generated code returns for a missing required
// field.
func RequiredFieldError(structName, fieldName string) error {
	return &RequiredFieldErr{Struct: structName, Field: fieldName}
}
