package llm

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestOverviewMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		obs  []float64
		want float64
	}{
		{"one bucket", []float64{0.05, 0.05}, 0.05},
		{"spread", []float64{0.05, 0.05, 0.2, 0.2}, 0.1},
		{"above the last bound", []float64{100, 100}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Buckets: []float64{0.1, 0.5, 10}})
			for _, v := range tc.obs {
				h.Observe(v)
			}
			var m dto.Metric
			if err := h.Write(&m); err != nil {
				t.Fatal(err)
			}
			if got := median(m.GetHistogram()); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
