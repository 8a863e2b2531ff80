package redlockd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestEveryDocumentedCodeHasItsKind(t *testing.T) {
	cases := []struct {
		code      codes.Code
		kind      error
		retryable bool
	}{
		{codes.Aborted, ErrHeld, false},
		{codes.FailedPrecondition, ErrNotHeld, false},
		{codes.Unavailable, ErrUnavailable, true},
		{codes.DeadlineExceeded, ErrDeadlineExceeded, false},
		{codes.Canceled, ErrCanceled, false},
		{codes.InvalidArgument, ErrInvalidArgument, false},
		{codes.ResourceExhausted, ErrResourceExhausted, true},
		{codes.Unauthenticated, ErrUnauthenticated, false},
		{codes.PermissionDenied, ErrPermissionDenied, false},
		{codes.Internal, ErrOther, false},
	}
	for _, tc := range cases {
		err := fromRPC("Acquire", status.Error(tc.code, "because"))
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, tc.kind) || e.Retryable() != tc.retryable {
			t.Errorf("%v: %#v", tc.code, err)
		}
		if status.Code(err) != tc.code || status.Convert(err).Message() != "because" {
			t.Errorf("%v: status answers %v %q", tc.code, status.Code(err), status.Convert(err).Message())
		}
		wrapped := fmt.Errorf("ours: %w", err)
		if !errors.Is(wrapped, tc.kind) || status.Code(wrapped) != tc.code {
			t.Errorf("%v: lost through wrapping", tc.code)
		}
	}
}

func TestContextKinds(t *testing.T) {
	if !errors.Is(fromRPC("Acquire", status.Error(codes.DeadlineExceeded, "")), context.DeadlineExceeded) {
		t.Error("DEADLINE_EXCEEDED is not context.DeadlineExceeded")
	}
	if !errors.Is(fromRPC("Acquire", status.Error(codes.Canceled, "")), context.Canceled) {
		t.Error("CANCELLED is not context.Canceled")
	}
	if errors.Is(fromRPC("Acquire", status.Error(codes.Aborted, "")), context.Canceled) {
		t.Error("ABORTED is context.Canceled")
	}
	// The daemon's server enforcing this client's grpc-timeout first.
	timedOut := fromRPC("Acquire", status.Error(codes.Canceled, "Timeout expired"))
	if !errors.Is(timedOut, ErrDeadlineExceeded) || !errors.Is(timedOut, context.DeadlineExceeded) || status.Code(timedOut) != codes.DeadlineExceeded {
		t.Errorf("CANCELLED \"Timeout expired\" is %v, not the deadline", timedOut)
	}
}

func TestInvalidArgumentNamesTheField(t *testing.T) {
	for message, field := range map[string]string{
		"ttl: must be at least 100ms": "ttl",
		"request.resource: too long":  "request.resource",
		"no field here":               "",
	} {
		var e *Error
		if !errors.As(fromRPC("Acquire", status.Error(codes.InvalidArgument, message)), &e) || e.Field != field {
			t.Errorf("%q: field %q, want %q", message, e.Field, field)
		}
	}
}

func TestStopMargin(t *testing.T) {
	for ttl, want := range map[string]string{"100ms": "50ms", "3s": "300ms", "60s": "2s"} {
		d, _ := time.ParseDuration(ttl)
		w, _ := time.ParseDuration(want)
		if got := StopMargin(d); got != w {
			t.Errorf("StopMargin(%s) = %s, want %s", ttl, got, want)
		}
	}
}
