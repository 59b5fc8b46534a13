package llmadmin

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now = func() time.Time { return clock }
	defer func() { now = time.Now }()
	l := newLimiter(3, time.Minute)
	for i := range 3 {
		if w := l.blocked("1.2.3.4"); w != 0 {
			t.Fatalf("blocked after %d failures", i)
		}
		if reached := l.fail("1.2.3.4"); reached != (i == 2) {
			t.Errorf("failure %d: got reached=%v", i+1, reached)
		}
	}
	if w := l.blocked("1.2.3.4"); w != time.Minute {
		t.Errorf("got wait %v, want 1m", w)
	}
	if w := l.blocked("5.6.7.8"); w != 0 {
		t.Errorf("another client waits %v", w)
	}
	clock = clock.Add(45 * time.Second)
	if w := l.blocked("1.2.3.4"); w != 15*time.Second {
		t.Errorf("got wait %v, want 15s", w)
	}
	clock = clock.Add(15 * time.Second)
	if w := l.blocked("1.2.3.4"); w != 0 {
		t.Errorf("still blocked after the window: %v", w)
	}
	if l.fail("1.2.3.4") {
		t.Error("one failure in a new window reached the limit")
	}
}
