package hints

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/; `go test` replays
// them on every run, `go test -fuzz=FuzzParseSize` explores further.

func FuzzParseSize(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			require.Zero(t, n)
			return
		}
		require.GreaterOrEqual(t, n, 0)
		require.LessOrEqual(t, n, MaxSize)
		back, err := ParseSize(FormatSize(n))
		require.NoError(t, err)
		require.Equal(t, n, back)
	})
}

func FuzzParseDuration(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			require.Zero(t, d)
			return
		}
		require.GreaterOrEqual(t, int64(d), int64(0))
		back, err := ParseDuration(FormatDuration(d))
		require.NoError(t, err)
		require.Equal(t, d, back)
	})
}

// FuzzParseValue runs every key's parser: an accepted value's canonical
// spelling must parse back to the same canonical spelling and the same Set,
// since explain prints the canonical form and users may paste it back.
func FuzzParseValue(f *testing.F) {
	f.Fuzz(func(t *testing.T, key, raw string) {
		k, ok := LookupKey(key)
		if !ok {
			return
		}
		var a Set
		canon, err := k.apply(&a, raw)
		if err != nil {
			require.True(t, isKnownKind(err), "error %v has no sentinel", err)
			return
		}
		var b Set
		canon2, err := k.apply(&b, canon)
		require.NoError(t, err, "canonical %q of %q", canon, raw)
		require.Equal(t, canon, canon2)
		require.True(t, a.Equal(b))
		require.Equal(t, GoLiteral(a), GoLiteral(b))
	})
}

// FuzzResolve feeds arbitrary entries through the resolver: it must never
// panic, every diagnostic carries the position prefix, and the Set it
// resolves must equal a set built from the recorded values.
func FuzzResolve(f *testing.F) {
	f.Fuzz(func(t *testing.T, key1, val1, key2, val2 string, side uint8) {
		g := RawGroup{Side: RawSide(side % 4), Pos: Pos{"f.thrift", 1, 1}, Entries: []RawEntry{
			{Key: key1, Value: val1, Pos: Pos{"f.thrift", 1, 1}, ValuePos: Pos{"f.thrift", 1, 2}},
			{Key: key2, Value: val2, Pos: Pos{"f.thrift", 2, 1}, ValuePos: Pos{"f.thrift", 2, 2}},
		}}
		res, err := Resolve("S", []RawGroup{g}, []RawFunction{{Name: "fn", Groups: []RawGroup{g}}})
		require.NotNil(t, res)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				require.True(t, strings.HasPrefix(line, "f.thrift:"), line)
			}
			require.True(t, isKnownKind(err))
		}
		for _, r := range []*Resolved{&res.Client, &res.Server, &res.Functions[0].Client, &res.Functions[0].Server} {
			var s Set
			for _, v := range r.Values {
				if v.App {
					if s.App == nil {
						s.App = map[string]string{}
					}
					s.App[v.Key] = v.Value
					continue
				}
				if v.Origin.IsDefault() {
					continue
				}
				k, ok := LookupKey(v.Key)
				require.True(t, ok)
				_, err := k.apply(&s, v.Value)
				require.NoError(t, err)
			}
			assert.True(t, s.Equal(r.Set), "%s vs %s", GoLiteral(s), GoLiteral(r.Set))
		}
	})
}

func isKnownKind(err error) bool {
	for _, k := range []error{ErrUnknownKey, ErrBadValue, ErrRange, ErrScope, ErrSide, ErrConflict, ErrDuplicate} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}
