package duck

import (
	"fmt"
	"math"
)

// Int64 converts a value the driver returns for an integer column (NULL
// as 0: callers keep NULLs in their own bitmap).
func Int64(v any) (int64, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("%d does not fit BIGINT", x)
		}
		return int64(x), nil
	default:
		return 0, fmt.Errorf("integer column holds %T", v)
	}
}

// Float64 is Int64 for floating-point columns.
func Float64(v any) (float64, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	default:
		return 0, fmt.Errorf("floating-point column holds %T", v)
	}
}
