package crosstest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/hatrpc/hatrpc/pkg/proto"
	tt "github.com/hatrpc/hatrpc/test/crosstest/gen/thrifttest"
)

// Checker runs the checks of Apache's test clients (test/go/src/bin/testclient,
// test/py/TestClient.py): every ThriftTest method with their exact values
// and exceptions, SecondService when multiplexed, and the oneway call
// followed by a normal one on the same connection.
type Checker struct {
	T      *tt.ThriftTestClient
	Second *tt.SecondServiceClient // nil unless the stack is multiplexed
	NoUUID bool                    // the server's IDL has no testUuid
	n      int
}

// Checks is how many checks a run passed so far; a caller asserts the
// exact count so that a check silently dropped shows up.
func (c *Checker) Checks() int { return c.n }

// CheckCount is the number of checks one Run passes, by whether it calls
// SecondService and testUuid.
func CheckCount(multiplexed, uuid bool) int {
	n := 48
	if multiplexed {
		n++
	}
	if uuid {
		n++
	}
	return n
}

func (c *Checker) eq(what string, want, got any) error {
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("%s: want %#v, got %#v", what, want, got)
	}
	c.n++
	return nil
}

// echo calls f(want) and compares the result.
func echo[T any](ctx context.Context, c *Checker, what string, f func(context.Context, T) (T, error), want T) error {
	got, err := f(ctx, want)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return c.eq(what, want, got)
}

// Run performs every check once and returns the first mismatch.
func (c *Checker) Run(ctx context.Context) error {
	steps := []func(context.Context) error{
		c.scalars, c.strings, c.containers, c.structs, c.exceptions, c.oneway,
	}
	if !c.NoUUID {
		steps = append(steps, c.uuid)
	}
	if c.Second != nil {
		steps = append(steps, c.second)
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (c *Checker) scalars(ctx context.Context) error {
	if err := c.T.TestVoid(ctx); err != nil {
		return fmt.Errorf("testVoid: %w", err)
	}
	c.n++
	for _, err := range []error{
		echo(ctx, c, "testBool(true)", c.T.TestBool, true),
		echo(ctx, c, "testBool(false)", c.T.TestBool, false),
		echo(ctx, c, "testByte(42)", c.T.TestByte, int8(42)),
		echo(ctx, c, "testByte(-127)", c.T.TestByte, int8(-127)),
		echo(ctx, c, "testI32(-1)", c.T.TestI32, int32(-1)),
		echo(ctx, c, "testI32(4242)", c.T.TestI32, int32(4242)),
		echo(ctx, c, "testI64(-34359738368)", c.T.TestI64, int64(-34359738368)),
		echo(ctx, c, "testI64(424242)", c.T.TestI64, int64(424242)),
		echo(ctx, c, "testDouble(42.42)", c.T.TestDouble, 42.42),
		echo(ctx, c, "testDouble(-5.235098235)", c.T.TestDouble, -5.235098235),
		echo(ctx, c, "testDouble(-0.000341012439638598279)", c.T.TestDouble, -0.000341012439638598279),
		echo(ctx, c, "testDouble(max)", c.T.TestDouble, math.MaxFloat64),
		echo(ctx, c, "testEnum(TWO)", c.T.TestEnum, tt.Numberz_TWO),
		echo(ctx, c, "testEnum(FIVE)", c.T.TestEnum, tt.Numberz_FIVE),
		echo(ctx, c, "testTypedef(42)", c.T.TestTypedef, tt.UserId(42)),
		echo(ctx, c, "testTypedef(0xffffffffffffff)", c.T.TestTypedef, tt.UserId(0xffffffffffffff)),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// unicode is Python's test string: escapes, JSON's special characters and
// text in many scripts.
const unicode = "\b\t\n/\\\\\r{}:パイソン\" Afrikaans, العربية, Башҡорт, Български, বাংলা, ᏣᎳᎩ, " +
	"Словѣ́ньскъ / ⰔⰎⰑⰂⰡⰐⰠⰔⰍⰟ, ދިވެހިބަސް, Ελληνικά, 贛語, ગુજરાતી, עברית, हिन्दी, 日本語, ქართული, ಕನ್ನಡ, 한국어, ລາວ, " +
	"മലയാളം, ไทย, Tiếng Việt, ייִדיש, 中文, 粵語, \u202aNorsk\u202c"

func (c *Checker) strings(ctx context.Context) error {
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	for _, err := range []error{
		echo(ctx, c, "testString(thing)", c.T.TestString, "thing"),
		echo(ctx, c, "testString(empty)", c.T.TestString, ""),
		echo(ctx, c, "testString(Python×20)", c.T.TestString, strings.Repeat("Python", 20)),
		echo(ctx, c, "testString(unicode)", c.T.TestString, unicode),
		echo(ctx, c, "testBinary(0..255)", c.T.TestBinary, bin),
		echo(ctx, c, "testBinary(empty)", c.T.TestBinary, []byte{}),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Checker) containers(ctx context.Context) error {
	for _, err := range []error{
		echo(ctx, c, "testMap", c.T.TestMap, map[int32]int32{1: 2, 3: 4, 5: 42}),
		echo(ctx, c, "testMap(negative)", c.T.TestMap, map[int32]int32{0: 1, 1: 2, 2: 3, 3: 4, -1: -2}),
		echo(ctx, c, "testStringMap", c.T.TestStringMap, map[string]string{"a": "2", "b": "blah", "some": "thing"}),
		echo(ctx, c, "testList", c.T.TestList, []int32{1, 2, 42}),
		echo(ctx, c, "testList(negative)", c.T.TestList, []int32{1, 4, 9, -42}),
		echo(ctx, c, "testList(empty)", c.T.TestList, []int32{}),
	} {
		if err != nil {
			return err
		}
	}
	// A set has no order on the wire.
	set := []int32{8, 1, 42}
	got, err := c.T.TestSet(ctx, set)
	if err != nil {
		return fmt.Errorf("testSet: %w", err)
	}
	slices.Sort(got)
	if err := c.eq("testSet", []int32{1, 8, 42}, got); err != nil {
		return err
	}
	mm, err := c.T.TestMapMap(ctx, 42)
	if err != nil {
		return fmt.Errorf("testMapMap: %w", err)
	}
	return c.eq("testMapMap", MapMap(), mm)
}

func (c *Checker) structs(ctx context.Context) error {
	xs := &tt.Xtruct{StringThing: "thing", ByteThing: 42, I32Thing: 4242, I64Thing: 424242}
	neg := &tt.Xtruct{StringThing: "Zero", ByteThing: 1, I32Thing: -3, I64Thing: -5}
	for _, err := range []error{
		echo(ctx, c, "testStruct", c.T.TestStruct, xs),
		echo(ctx, c, "testStruct(negative)", c.T.TestStruct, neg),
		echo(ctx, c, "testNest", c.T.TestNest, &tt.Xtruct2{StructThing: xs}),
		echo(ctx, c, "testNest(full)", c.T.TestNest, &tt.Xtruct2{ByteThing: 1, StructThing: neg, I32Thing: -1}),
	} {
		if err != nil {
			return err
		}
	}
	crazy := &tt.Insanity{
		UserMap: map[tt.Numberz]tt.UserId{tt.Numberz_FIVE: 5, tt.Numberz_EIGHT: 8},
		Xtructs: []*tt.Xtruct{
			{StringThing: "Goodbye4", ByteThing: 4, I32Thing: 4, I64Thing: 4},
			{StringThing: "Hello2", ByteThing: 2, I32Thing: 2, I64Thing: 2},
		},
	}
	ins, err := c.T.TestInsanity(ctx, crazy)
	if err != nil {
		return fmt.Errorf("testInsanity: %w", err)
	}
	// An empty Insanity decodes with nil or empty containers depending on
	// the peer: what Apache's clients check is that it holds nothing.
	empty := ins[2][tt.Numberz_SIX]
	if empty == nil || len(empty.UserMap) != 0 || len(empty.Xtructs) != 0 || len(ins) != 2 || len(ins[2]) != 1 {
		return fmt.Errorf("testInsanity: want {1: {2: arg, 3: arg}, 2: {6: {}}}, got %v", ins)
	}
	c.n++
	if err := c.eq("testInsanity[1]", map[tt.Numberz]*tt.Insanity{tt.Numberz_TWO: crazy, tt.Numberz_THREE: crazy}, ins[1]); err != nil {
		return err
	}
	got, err := c.T.TestMulti(ctx, 42, 4242, 424242, map[int16]string{1: "blah", 2: "thing"}, tt.Numberz_EIGHT, 24)
	if err != nil {
		return fmt.Errorf("testMulti: %w", err)
	}
	if err := c.eq("testMulti", &tt.Xtruct{StringThing: "Hello2", ByteThing: 42, I32Thing: 4242, I64Thing: 424242}, got); err != nil {
		return err
	}
	got, err = c.T.TestMulti(ctx, 74, 0xff00ff, 0xffffffffd0d0, map[int16]string{0: "abc"}, tt.Numberz_FIVE, 0xf0f0f0)
	if err != nil {
		return fmt.Errorf("testMulti(python): %w", err)
	}
	return c.eq("testMulti(python)", &tt.Xtruct{StringThing: "Hello2", ByteThing: 74, I32Thing: 0xff00ff, I64Thing: 0xffffffffd0d0}, got)
}

func (c *Checker) exceptions(ctx context.Context) error {
	for _, arg := range []string{"Safe", "success"} {
		if err := c.T.TestException(ctx, arg); err != nil {
			return fmt.Errorf("testException(%s): %w", arg, err)
		}
		c.n++
	}
	err := c.T.TestException(ctx, "Xception")
	var x *tt.Xception
	if !errors.As(err, &x) {
		return fmt.Errorf("testException(Xception): want *Xception, got %v", err)
	}
	if err := c.eq("testException(Xception)", &tt.Xception{ErrorCode: 1001, Message: "Xception"}, x); err != nil {
		return err
	}
	err = c.T.TestException(ctx, "TException")
	var ae *proto.ApplicationException
	if !errors.As(err, &ae) {
		return fmt.Errorf("testException(TException): want a TApplicationException, got %v", err)
	}
	c.n++
	r, err := c.T.TestMultiException(ctx, "Xception", "ignoreme")
	if !errors.As(err, &x) || r != nil {
		return fmt.Errorf("testMultiException(Xception): want *Xception, got %v, %v", r, err)
	}
	if err := c.eq("testMultiException(Xception)", &tt.Xception{ErrorCode: 1001, Message: "This is an Xception"}, x); err != nil {
		return err
	}
	var x2 *tt.Xception2
	r, err = c.T.TestMultiException(ctx, "Xception2", "ignoreme")
	if !errors.As(err, &x2) || r != nil {
		return fmt.Errorf("testMultiException(Xception2): want *Xception2, got %v, %v", r, err)
	}
	want2 := &tt.Xception2{ErrorCode: 2002, StructThing: &tt.Xtruct{StringThing: "This is an Xception2"}}
	if err := c.eq("testMultiException(Xception2)", want2, x2); err != nil {
		return err
	}
	r, err = c.T.TestMultiException(ctx, "success", "foobar")
	if err != nil {
		return fmt.Errorf("testMultiException(success): %w", err)
	}
	return c.eq("testMultiException(success)", &tt.Xtruct{StringThing: "foobar"}, r)
}

// oneway: the oneway call returns without waiting for the handler, and the
// connection still answers the call after it.
func (c *Checker) oneway(ctx context.Context) error {
	if err := c.T.TestOneway(ctx, 1); err != nil {
		return fmt.Errorf("testOneway: %w", err)
	}
	c.n++
	return echo(ctx, c, "testString after testOneway", c.T.TestString, "Python")
}

func (c *Checker) uuid(ctx context.Context) error {
	u := [16]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	return echo(ctx, c, "testUuid", c.T.TestUuid, u)
}

func (c *Checker) second(ctx context.Context) error {
	got, err := c.Second.SecondtestString(ctx, "foobar")
	if err != nil {
		return fmt.Errorf("secondtestString: %w", err)
	}
	return c.eq("secondtestString", `testString("foobar")`, got)
}
