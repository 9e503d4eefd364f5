package crosstest

import (
	"context"
	"errors"
	"time"

	tt "github.com/hatrpc/hatrpc/test/crosstest/gen/thrifttest"
)

// Handler answers ThriftTest and SecondService as Apache's test servers do
// (test/go/src/common/printing_handler.go, test/py/TestServer.py): every
// method echoes its argument, testException and testMultiException throw on
// the names Apache's clients send, testMapMap and testInsanity return
// Apache's fixed shapes.
type Handler struct {
	// OnewayUnit is what one "second" of testOneway sleeps. Apache's Python
	// server sleeps a third of it ("be quick"); that is the default.
	OnewayUnit time.Duration
}

var (
	_ tt.ThriftTestHandler    = (*Handler)(nil)
	_ tt.SecondServiceHandler = (*Handler)(nil)
)

// errTException is what Apache's servers throw for testException("TException"):
// an error that is no declared exception, so the client gets a
// TApplicationException.
var errTException = errors.New("this is a TException")

func (h *Handler) TestVoid(context.Context) error { return nil }

func (h *Handler) TestString(_ context.Context, s string) (string, error) { return s, nil }

func (h *Handler) TestBool(_ context.Context, b bool) (bool, error) { return b, nil }

func (h *Handler) TestByte(_ context.Context, b int8) (int8, error) { return b, nil }

func (h *Handler) TestI32(_ context.Context, v int32) (int32, error) { return v, nil }

func (h *Handler) TestI64(_ context.Context, v int64) (int64, error) { return v, nil }

func (h *Handler) TestDouble(_ context.Context, v float64) (float64, error) { return v, nil }

func (h *Handler) TestBinary(_ context.Context, b []byte) ([]byte, error) { return b, nil }

func (h *Handler) TestUuid(_ context.Context, u [16]byte) ([16]byte, error) { return u, nil }

func (h *Handler) TestStruct(_ context.Context, x *tt.Xtruct) (*tt.Xtruct, error) { return x, nil }

func (h *Handler) TestNest(_ context.Context, x *tt.Xtruct2) (*tt.Xtruct2, error) { return x, nil }

func (h *Handler) TestMap(_ context.Context, m map[int32]int32) (map[int32]int32, error) {
	return m, nil
}

func (h *Handler) TestStringMap(_ context.Context, m map[string]string) (map[string]string, error) {
	return m, nil
}

func (h *Handler) TestSet(_ context.Context, s []int32) ([]int32, error) { return s, nil }

func (h *Handler) TestList(_ context.Context, l []int32) ([]int32, error) { return l, nil }

func (h *Handler) TestEnum(_ context.Context, e tt.Numberz) (tt.Numberz, error) { return e, nil }

func (h *Handler) TestTypedef(_ context.Context, u tt.UserId) (tt.UserId, error) { return u, nil }

// MapMap is the value testMapMap returns, whatever its argument.
func MapMap() map[int32]map[int32]int32 {
	return map[int32]map[int32]int32{
		-4: {-4: -4, -3: -3, -2: -2, -1: -1},
		4:  {4: 4, 3: 3, 2: 2, 1: 1},
	}
}

func (h *Handler) TestMapMap(context.Context, int32) (map[int32]map[int32]int32, error) {
	return MapMap(), nil
}

func (h *Handler) TestInsanity(_ context.Context, arg *tt.Insanity) (map[tt.UserId]map[tt.Numberz]*tt.Insanity, error) {
	return map[tt.UserId]map[tt.Numberz]*tt.Insanity{
		1: {tt.Numberz_TWO: arg, tt.Numberz_THREE: arg},
		2: {tt.Numberz_SIX: tt.NewInsanity()},
	}, nil
}

func (h *Handler) TestMulti(_ context.Context, arg0 int8, arg1 int32, arg2 int64, _ map[int16]string, _ tt.Numberz, _ tt.UserId) (*tt.Xtruct, error) {
	return &tt.Xtruct{StringThing: "Hello2", ByteThing: arg0, I32Thing: arg1, I64Thing: arg2}, nil
}

func (h *Handler) TestException(_ context.Context, arg string) error {
	switch arg {
	case "Xception":
		return &tt.Xception{ErrorCode: 1001, Message: arg}
	case "TException":
		return errTException
	}
	return nil
}

func (h *Handler) TestMultiException(_ context.Context, arg0, arg1 string) (*tt.Xtruct, error) {
	switch arg0 {
	case "Xception":
		return nil, &tt.Xception{ErrorCode: 1001, Message: "This is an Xception"}
	case "Xception2":
		return nil, &tt.Xception2{ErrorCode: 2002, StructThing: &tt.Xtruct{StringThing: "This is an Xception2"}}
	}
	return &tt.Xtruct{StringThing: arg1}, nil
}

// TestOneway sleeps on a timer, not on ctx: the call's context may end as
// soon as the message is dispatched, and Apache's servers sleep regardless.
func (h *Handler) TestOneway(_ context.Context, seconds int32) error {
	unit := h.OnewayUnit
	if unit == 0 {
		unit = time.Second / 3
	}
	time.Sleep(time.Duration(max(seconds, 0)) * unit)
	return nil
}

func (h *Handler) SecondtestString(_ context.Context, s string) (string, error) {
	return `testString("` + s + `")`, nil
}
