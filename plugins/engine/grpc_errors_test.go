package engine

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A plugin that does not answer gives an error that says so without the
// transport's details (its socket's path).
func TestFromStatusHidesTheTransport(t *testing.T) {
	raw := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /tmp/plugin3395157284: connect: no such file or directory"`)
	err := fromStatus(raw)
	if !errors.Is(err, ErrUnavailable) || strings.Contains(err.Error(), "/tmp/") || strings.Contains(err.Error(), "transport") {
		t.Fatalf("got %v, want ErrUnavailable without the socket", err)
	}
	if err := fromStatus(status.Error(codes.Unknown, "model file not found")); err.Error() != "model file not found" {
		t.Fatalf("an engine's own error: got %v", err)
	}
}
