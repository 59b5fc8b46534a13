package comfy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/engines/simimage"
)

// Without the server's events the client polls its history: the same
// outputs, a failing node's error, and an interrupt when cancelled.
func TestRunPolled(t *testing.T) {
	c := newServer(t, simimage.Config{Model: "m", StepTime: time.Millisecond})
	var last Progress
	outs, err := c.RunPolled(context.Background(), json.RawMessage(wf), func(p Progress) { last = p })
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 || outs[0].Node != "9" || !strings.HasPrefix(outs[0].Filename, "kite_") || last.Fraction() != 1 {
		t.Fatalf("outputs %+v, progress %+v", outs, last)
	}
	failing := newServer(t, simimage.Config{Model: "m", StepTime: time.Millisecond, FailStep: 2})
	var ne *NodeError
	if _, err := failing.RunPolled(context.Background(), json.RawMessage(wf), nil); !errors.As(err, &ne) || ne.Node != "3" {
		t.Errorf("a failing node: %v", err)
	}
	slow := newServer(t, simimage.Config{Model: "m", StepTime: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := slow.RunPolled(ctx, json.RawMessage(wf), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled: %v", err)
	}
}
