package proto

import "strconv"

// Application exception types, wire-compatible with TApplicationException.
const (
	ExcUnknown                int32 = 0
	ExcUnknownMethod          int32 = 1
	ExcInvalidMessageType     int32 = 2
	ExcWrongMethodName        int32 = 3
	ExcBadSequenceID          int32 = 4
	ExcMissingResult          int32 = 5
	ExcInternalError          int32 = 6
	ExcProtocolError          int32 = 7
	ExcInvalidTransform       int32 = 8
	ExcInvalidProtocol        int32 = 9
	ExcUnsupportedClientType  int32 = 10
	ExcValidationFailed       int32 = 11
	excDefaultMessagesMaxType       = 11
)

// Default messages are Apache's, so an exception with an empty Message
// encodes to the same bytes Apache produces.
var excDefaultMessages = [...]string{
	"unknown application exception", "unknown method", "invalid message type",
	"wrong method name", "bad sequence ID", "missing result",
	"unknown internal error", "unknown protocol error", "Invalid transform",
	"Invalid protocol", "Unsupported client type", "validation failed",
}

// ApplicationException is Thrift's TApplicationException: field 1 message
// (string), field 2 type (i32).
type ApplicationException struct {
	Type    int32
	Message string
}

// NewApplicationException returns an exception of the given type.
func NewApplicationException(typ int32, msg string) *ApplicationException {
	return &ApplicationException{Type: typ, Message: msg}
}

func (e *ApplicationException) text() string {
	if e.Message != "" {
		return e.Message
	}
	if e.Type >= 0 && e.Type <= excDefaultMessagesMaxType {
		return excDefaultMessages[e.Type]
	}
	return ""
}

func (e *ApplicationException) Error() string {
	return "thrift application exception (type " + strconv.Itoa(int(e.Type)) + "): " + e.text()
}

// Is makes errors.Is match any ApplicationException of the same type.
func (e *ApplicationException) Is(target error) bool {
	t, ok := target.(*ApplicationException)
	return ok && t.Type == e.Type && (t.Message == "" || t.Message == e.Message)
}

// EncodeBinary writes the exception struct.
func (e *ApplicationException) EncodeBinary(w *BinaryWriter) error {
	w.WriteStructBegin()
	if m := e.text(); m != "" {
		w.WriteFieldBegin(STRING, 1)
		w.WriteString(m)
	}
	w.WriteFieldBegin(I32, 2)
	w.WriteI32(e.Type)
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

// EncodeCompact writes the exception struct.
func (e *ApplicationException) EncodeCompact(w *CompactWriter) error {
	w.WriteStructBegin()
	if m := e.text(); m != "" {
		w.WriteFieldBegin(STRING, 1)
		w.WriteString(m)
	}
	w.WriteFieldBegin(I32, 2)
	w.WriteI32(e.Type)
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

// DecodeBinary reads the exception struct, skipping unknown fields.
func (e *ApplicationException) DecodeBinary(r *BinaryReader) error {
	*e = ApplicationException{}
	if err := r.ReadStructBegin(); err != nil {
		return err
	}
	for {
		t, id, err := r.ReadFieldBegin()
		if err != nil {
			return err
		}
		if t == STOP {
			break
		}
		switch {
		case id == 1 && t == STRING:
			e.Message, err = r.ReadString()
		case id == 2 && t == I32:
			e.Type, err = r.ReadI32()
		default:
			err = r.Skip(t)
		}
		if err != nil {
			return err
		}
	}
	return r.ReadStructEnd()
}

// DecodeCompact reads the exception struct, skipping unknown fields.
func (e *ApplicationException) DecodeCompact(r *CompactReader) error {
	*e = ApplicationException{}
	if err := r.ReadStructBegin(); err != nil {
		return err
	}
	for {
		t, id, err := r.ReadFieldBegin()
		if err != nil {
			return err
		}
		if t == STOP {
			break
		}
		switch {
		case id == 1 && t == STRING:
			e.Message, err = r.ReadString()
		case id == 2 && t == I32:
			e.Type, err = r.ReadI32()
		default:
			err = r.Skip(t)
		}
		if err != nil {
			return err
		}
	}
	return r.ReadStructEnd()
}
