package status_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/status"
	"github.com/hatrpc/hatrpc/pkg/status/codes"
)

// A handler returns a status error; the caller switches on its code and
// reads its details.
func Example() {
	// In the handler:
	handler := func(ctx context.Context, user string) error {
		return status.New(codes.NotFound, "no such user").WithDetails("user", user)
	}

	// In the caller (the client returns the same status, decoded from
	// the reply):
	err := handler(context.Background(), "u1")
	var st *status.Status
	if errors.As(err, &st) {
		fmt.Println(st.Code(), st.Message(), st.Detail("user"))
	}
	fmt.Println(err)
	// Output:
	// NotFound no such user u1
	// status NotFound: no such user
}

// Code gives every error a code: the context's, a broken connection's
// (Unavailable), a service's own.
func ExampleCode() {
	const quotaExceeded = codes.User + 1
	fmt.Println(status.Code(nil))
	fmt.Println(status.Code(context.DeadlineExceeded))
	fmt.Println(status.Code(status.Error(quotaExceeded, "plan basic")))
	fmt.Println(status.Code(errors.New("anything else")))
	// Output:
	// OK
	// DeadlineExceeded
	// User(1001)
	// Unknown
}
