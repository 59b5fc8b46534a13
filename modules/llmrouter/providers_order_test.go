package llmrouter

import (
	"net/http"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// TestProviderOrderIsTheRoutersPolicy: the exported ordering follows what
// it is told as the router's does, and allocates nothing.
func TestProviderOrderIsTheRoutersPolicy(t *testing.T) {
	o := NewProviderOrder(threeProviders(catalog.PolicyCost, time.Second), func(name string) bool { return name == "chat" })
	now := time.Now().UnixNano()
	full := func(string) (int, int) { return 0, 2 }
	var buf [catalog.MaxProviders]int
	if got, why := o.Order(buf[:], now, 0.5, 0.5, nil); got[0] != 1 || why != "cheapest" {
		t.Errorf("with room: got %v %s, want local (1) cheapest", got, why)
	}
	if got, why := o.Order(buf[:], now, 0.5, 0.5, full); got[0] != 2 || why != "spill_full" {
		t.Errorf("local full: got %v %s, want cheap (2) spill_full", got, why)
	}
	o.Record(2, now, http.StatusTooManyRequests, "30", 0, nil, false, 0)
	if got, why := o.Order(buf[:], now+int64(time.Second), 0.5, 0.5, full); got[0] != 0 || why != "spill_full" {
		t.Errorf("cheap resting for 30s: got %v %s, want dear (0) spill_full", got, why)
	}
	if got, _ := o.Order(buf[:], now+int64(31*time.Second), 0.5, 0.5, full); got[0] != 2 {
		t.Errorf("cheap after its Retry-After: got %v, want cheap (2) first", got)
	}
	if n := testing.AllocsPerRun(100, func() { o.Order(buf[:], now, 0.3, 0.7, full) }); n != 0 {
		t.Errorf("Order allocates %v times per call, want none", n)
	}
}
