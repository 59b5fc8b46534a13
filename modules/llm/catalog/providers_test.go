package catalog

import "testing"

func TestProviderPriceCostMicros(t *testing.T) {
	p := &ProviderPrice{InputPerMillion: 1, OutputPerMillion: 4, CachedPerMillion: 0.25}
	for _, tc := range []struct {
		name                       string
		prompt, cached, completion int64
		want                       int64
	}{
		{"no cached tokens", 1000, 0, 100, 1400},
		{"cached tokens at the cached price", 1000, 800, 100, 200 + 200 + 400},
		{"more cached than prompt is not believed", 100, 800, 0, 100},
	} {
		if got := p.CostMicros(tc.prompt, tc.cached, tc.completion); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := (&ProviderPrice{InputPerMillion: 2}).CostMicros(1000, 500, 0); got != 2000 {
		t.Errorf("without a cached price: got %d, want 2000 (all at the input price)", got)
	}
}
