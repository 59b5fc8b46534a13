package traffic

import (
	"math"
	"slices"
	"strconv"
)

// histogram is a step's count in each bucket, by upper bound (not
// cumulative).
type histogram map[float64]int64

// add adds a bucket's count; le is its upper bound as Key wrote it.
func (h histogram) add(le string, n int64) {
	if f, err := strconv.ParseFloat(le, 64); err == nil {
		h[f] += n
	}
}

// bounds adds the buckets of les that counted nothing.
func (h histogram) bounds(les []float64) {
	for _, le := range les {
		h[le] += 0
	}
}

// quantile estimates the q-quantile of the observations counted in h as
// Prometheus' histogram_quantile does: it finds the bucket that holds the
// rank and interpolates linearly inside it (the first bucket's lower
// bound is 0); a rank in the +Inf bucket answers the highest finite
// bound. It is false without observations.
func (h histogram) quantile(q float64) (float64, bool) {
	les := make([]float64, 0, len(h))
	var total int64
	for le, n := range h {
		les = append(les, le)
		total += n
	}
	if total <= 0 {
		return 0, false
	}
	slices.Sort(les)
	rank := q * float64(total)
	lower, below := 0.0, 0.0
	for _, le := range les {
		n := below + float64(h[le])
		if n >= rank && h[le] > 0 {
			if math.IsInf(le, 1) {
				return lower, true
			}
			return lower + (le-lower)*(rank-below)/(n-below), true
		}
		lower, below = le, n
		if math.IsInf(le, 1) {
			break
		}
	}
	return lower, true
}
