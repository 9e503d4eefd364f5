package hints

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int
		err  error
	}{
		{"0", 0, nil},
		{"512", 512, nil},
		{"512B", 512, nil},
		{"4KB", 4096, nil},
		{"4kb", 4096, nil},
		{"4KiB", 4096, nil},
		{"4K", 4096, nil},
		{"1MB", 1 << 20, nil},
		{"1MiB", 1 << 20, nil},
		{"2GB", 2 << 30, nil},
		{"1TiB", 1 << 40, nil},
		{" 64 ", 64, nil},
		{"1099511627776", 1 << 40, nil},
		{"1099511627777", 0, ErrRange},
		{"2TB", 0, ErrRange},
		{"99999999999999999999999", 0, ErrRange},
		{"-1", 0, ErrRange},
		{"-0", 0, nil},
		{"", 0, ErrBadValue},
		{"KB", 0, ErrBadValue},
		{"4XB", 0, ErrBadValue},
		{"1.5KB", 0, ErrBadValue},
		{"4 KB", 0, ErrBadValue},
		{"abc", 0, ErrBadValue},
		{"0x10", 0, ErrBadValue},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		in   int
		want string
	}{
		{0, "0"}, {1, "1"}, {512, "512"}, {1000, "1000"}, {1024, "1KiB"}, {1536, "1536"},
		{4096, "4KiB"}, {1 << 20, "1MiB"}, {3 << 30, "3GiB"}, {1 << 40, "1TiB"}, {1025 << 10, "1025KiB"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, FormatSize(tt.in))
		back, err := ParseSize(tt.want)
		require.NoError(t, err)
		assert.Equal(t, tt.in, back, "round trip of %s", tt.want)
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  error
	}{
		{"50us", 50 * time.Microsecond, nil},
		{"50µs", 50 * time.Microsecond, nil},
		{"2ms", 2 * time.Millisecond, nil},
		{"1.5ms", 1500 * time.Microsecond, nil},
		{"1s", time.Second, nil},
		{"1m30s", 90 * time.Second, nil},
		{"100ns", 100, nil},
		{"0s", 0, nil},
		{"100", 0, ErrBadValue},
		{"0", 0, ErrBadValue},
		{"", 0, ErrBadValue},
		{"2 ms", 0, ErrBadValue},
		{"5xs", 0, ErrBadValue},
		{"-5ms", 0, ErrRange},
		{"99999999999h", 0, ErrBadValue},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestFormatDuration(t *testing.T) {
	for _, d := range []time.Duration{50 * time.Microsecond, 2 * time.Millisecond, 1500 * time.Microsecond, 90 * time.Second, 7} {
		s := FormatDuration(d)
		assert.NotContains(t, s, "µ")
		back, err := ParseDuration(s)
		require.NoError(t, err)
		assert.Equal(t, d, back)
	}
	assert.Equal(t, "50us", FormatDuration(50*time.Microsecond))
}

func TestParseIntCountFraction(t *testing.T) {
	n, err := ParseInt("-3")
	require.NoError(t, err)
	assert.Equal(t, -3, n)
	_, err = ParseInt("1.5")
	require.ErrorIs(t, err, ErrBadValue)
	_, err = ParseInt("+3")
	require.ErrorIs(t, err, ErrBadValue)
	_, err = ParseInt("99999999999")
	require.ErrorIs(t, err, ErrRange)
	_, err = ParseCount("0")
	require.ErrorIs(t, err, ErrRange)
	n, err = ParseCount("7")
	require.NoError(t, err)
	assert.Equal(t, 7, n)

	fracs := []struct {
		in   string
		want float64
		err  error
	}{
		{"0.05", 0.05, nil}, {"5%", 0.05, nil}, {".5", 0.5, nil},
		{"0", 0, ErrRange}, {"1", 0, ErrRange}, {"150%", 0, ErrRange}, {"-0.1", 0, ErrRange},
		{"NaN", 0, ErrBadValue}, {"inf", 0, ErrBadValue}, {"0x1p-2", 0, ErrBadValue}, {"x", 0, ErrBadValue},
	}
	for _, tt := range fracs {
		got, err := ParseFraction(tt.in)
		if tt.err != nil {
			require.ErrorIs(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.InDelta(t, tt.want, got, 1e-12, tt.in)
	}
}

func TestErrorTypes(t *testing.T) {
	_, err := ParseSize("4XB")
	var ve *ValueError
	require.True(t, errors.As(err, &ve))
	assert.Equal(t, `bad size "4XB": want a size like 512, 4KB, 4KiB, 1MB`, err.Error())
	_, err = ParseSize("-4")
	var re *RangeError
	require.True(t, errors.As(err, &re))
	assert.Equal(t, `value "-4" must not be negative`, err.Error())
}
