package llmrouter

import (
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// A model with providers (catalog.Provider) is served by several catalog
// models; for each request the model's policy orders them, and the
// router tries them in that order until one answers. What the policies
// know of a provider they learn from live traffic: its recent time to
// first byte, when it rests (after a 429, for its Retry-After; after a
// failure, briefly), how much of its rpm and tpm this minute took, and,
// for self-hosted replicas, whether one has room.

// Why a provider was chosen, as the llmgw-provider header and the access
// log's llm_provider_reason say.
const (
	reasonCheapest   = iota // the cheapest of all
	reasonSpillFull         // a cheaper one is full (self-hosted replicas without room, or its rpm/tpm)
	reasonSpillRest         // a cheaper one rests after a 429 or a failure
	reasonSpillSlow         // a cheaper one breaks the latency objective
	reasonFastest           // the lowest recent time to first byte
	reasonExplore           // measured again, by the policy's explore share
	reasonWeighted          // drawn by weight
	reasonOrder             // the first in the declared order that can take it
	reasonFailover          // those before it failed for this request
	reasonLastResort        // every other was full, resting or failed
	reasonHeadroom          // the most of its rate limits left
	nReasons
)

var reasonNames = [nReasons]string{"cheapest", "spill_full", "spill_resting", "spill_slow", "fastest", "explore",
	"weighted", "order", "failover", "last_resort", "most_headroom"}

// Provider states as ordering sees them, best first.
const (
	stateOK = iota
	stateSlow
	stateFull
	stateResting
)

// spillReason is why a cheaper provider in state st was passed over.
var spillReason = [4]uint8{reasonCheapest, reasonSpillSlow, reasonSpillFull, reasonSpillRest}

const (
	// staleAfter is how old a provider's last time to first byte may be
	// before it is forgotten: a provider passed over as slow is tried
	// again after it.
	staleAfter = 30 * time.Second
	// ewmaWeight is the weight of a new time to first byte in the
	// recent one.
	ewmaWeight = 0.3
	// failRest and maxFailRest bound how long a provider that failed
	// (connect error, 5xx) rests: doubling with each failure in a row
	// (a failure while it rests, of a request sent before, does not
	// count).
	failRest    = 500 * time.Millisecond
	maxFailRest = 15 * time.Second
	// defaultRetryAfter is a 429's rest when it names none.
	defaultRetryAfter = time.Second
)

// providerSet is what the router knows of one model's providers.
type providerSet struct {
	model   *catalog.Model
	policy  string
	slo     int64 // latency objective, nanos; 0 none
	explore float64
	provs   []providerStats
	// header is the llmgw-provider value of each provider and reason,
	// shared by the answers (its capacity is its length, so that an
	// append to it copies).
	header [][nReasons][]string
}

// providerStats is one provider's live state; every field is atomic.
type providerStats struct {
	name       string // its catalog model
	rank       float64
	weight     int
	rpm, tpm   int64
	selfHosted bool
	ttft       atomic.Int64 // recent time to first byte, nanos (EWMA)
	sampled    atomic.Int64 // when ttft was last measured, unix nanos
	restUntil  atomic.Int64 // unix nanos
	restWhy    atomic.Int32 // why it rests: restFor429, restForFailures, restForLimit
	fails      atomic.Int32 // failures in a row
	winStart   atomic.Int64 // this minute's start, unix nanos
	winReqs    atomic.Int64
	winTokens  atomic.Int64
	// headroom is the share of its rate limits the provider said it had
	// left on its last answer, in millionths (headroomUnknown until it
	// says).
	headroom atomic.Int64

	requests [4]prometheus.Counter // ok, 429, 5xx, error
	ttftObs  prometheus.Observer
}

// Outcome kinds for the per-provider metrics.
const (
	outcomeOK = iota
	outcome429
	outcome5xx
	outcomeError
)

var outcomeNames = [4]string{"ok", "429", "5xx", "error"}

// newProviderSet readies m's providers; selfHosted reports whether a
// catalog model runs replicas here (its room counts) rather than calling
// an outside provider.
func newProviderSet(m *catalog.Model, selfHosted func(string) bool) *providerSet {
	ps := &providerSet{model: m, policy: m.Routing.PolicyName(), explore: m.Routing.ExploreShare(),
		provs: make([]providerStats, len(m.Providers)), header: make([][nReasons][]string, len(m.Providers))}
	if m.Routing != nil {
		ps.slo = int64(m.Routing.LatencyObjective)
	}
	for i, p := range m.Providers {
		st := &ps.provs[i]
		st.name, st.rank, st.weight = p.Model, p.Price.Rank(), max(p.Weight, 0)
		if p.Weight == 0 {
			st.weight = 1
		}
		st.rpm, st.tpm, st.selfHosted = int64(p.RPM), int64(p.TPM), selfHosted(p.Model)
		st.headroom.Store(headroomUnknown)
		for k := range outcomeNames {
			st.requests[k] = metricProviderRequests.WithLabelValues(m.Name, p.Name, outcomeNames[k])
		}
		st.ttftObs = metricProviderTTFB.WithLabelValues(m.Name, p.Name)
		for r := range reasonNames {
			ps.header[i][r] = []string{p.Name + "; reason=" + reasonNames[r]}[:1:1]
		}
	}
	return ps
}

// choice is one provider in a request's order and why it is there.
type choice struct {
	idx    uint8
	reason uint8
}

// roomFunc reports a provider's catalog model's replicas: the requests
// its ready replicas may still take below their target_concurrency, and
// that target summed over them (0: no ready replica).
type roomFunc func(name string) (free, total int)

// order writes the providers in the order the policy tries them into dst
// (at least as long as the providers) and returns it. rnd is a number in
// [0, 1) for the weighted draw and exploration, another for which to
// explore.
func (ps *providerSet) order(dst []choice, now int64, rnd, rnd2 float64, room roomFunc) []choice {
	var states [catalog.MaxProviders]uint8
	n := len(ps.provs)
	dst = dst[:n]
	for i := range ps.provs {
		states[i] = ps.provs[i].state(now, ps.slo, room)
		dst[i] = choice{idx: uint8(i)}
	}
	switch ps.policy {
	case catalog.PolicyCost:
		ps.orderCost(dst, states[:n])
	case catalog.PolicyLatency:
		ps.orderLatency(dst, states[:n], now, rnd, rnd2)
	case catalog.PolicyWeighted:
		ps.orderWeighted(dst, states[:n], rnd)
	case catalog.PolicyUsage:
		ps.orderUsage(dst, states[:n], now)
	default:
		sortChoices(dst, func(a, b choice) bool { return states[a.idx] < states[b.idx] })
		dst[0].reason = reasonOrder
	}
	if states[dst[0].idx] == stateFull || states[dst[0].idx] == stateResting {
		dst[0].reason = reasonLastResort
	}
	if ps.policy != catalog.PolicyLatency && ps.explore > 0 && rnd2 < ps.explore {
		ps.exploreSlow(dst, states[:n], now)
	}
	return dst
}

// orderCost puts providers that can take the request (within the
// objective, with room, not resting) first, cheapest first, then the
// slow, the full and the resting ones.
func (ps *providerSet) orderCost(dst []choice, states []uint8) {
	sortChoices(dst, func(a, b choice) bool {
		if states[a.idx] != states[b.idx] {
			return states[a.idx] < states[b.idx]
		}
		return ps.provs[a.idx].rank < ps.provs[b.idx].rank
	})
	// Why the first was chosen: it is the cheapest, or the cheapest
	// was passed over.
	cheapest := 0
	for i := range ps.provs {
		if ps.provs[i].rank < ps.provs[cheapest].rank {
			cheapest = i
		}
	}
	if int(dst[0].idx) == cheapest || ps.provs[dst[0].idx].rank == ps.provs[cheapest].rank {
		dst[0].reason = reasonCheapest
	} else {
		dst[0].reason = spillReason[states[cheapest]]
	}
}

// orderLatency puts the provider with the lowest recent time to first
// byte first (one not measured lately counts as fastest, so it is
// measured; one whose last tries failed as slowest), or with the explore share a random one that can take it.
func (ps *providerSet) orderLatency(dst []choice, states []uint8, now int64, rnd, rnd2 float64) {
	sortChoices(dst, func(a, b choice) bool {
		sa, sb := min(states[a.idx], stateFull), min(states[b.idx], stateFull) // slow is only slower
		if sa == stateSlow {
			sa = stateOK
		}
		if sb == stateSlow {
			sb = stateOK
		}
		if sa != sb {
			return sa < sb
		}
		return ps.provs[a.idx].speed(now) < ps.provs[b.idx].speed(now)
	})
	dst[0].reason = reasonFastest
	if rnd < ps.explore {
		ok := 0
		for ok < len(dst) && states[dst[ok].idx] <= stateSlow {
			ok++
		}
		if ok > 1 {
			j := 1 + int(rnd2*float64(ok-1))
			dst[0], dst[j] = dst[j], dst[0]
			dst[0].reason = reasonExplore
		}
	}
}

// orderWeighted draws the first by weight among those that can take the
// request; the others follow in the declared order.
func (ps *providerSet) orderWeighted(dst []choice, states []uint8, rnd float64) {
	sortChoices(dst, func(a, b choice) bool { return min(states[a.idx], stateFull) < min(states[b.idx], stateFull) })
	total := 0
	ok := 0
	for ok < len(dst) && states[dst[ok].idx] <= stateSlow {
		total += ps.provs[dst[ok].idx].weight
		ok++
	}
	if total > 0 {
		at := int(rnd * float64(total))
		for j := 0; j < ok; j++ {
			if at -= ps.provs[dst[j].idx].weight; at < 0 {
				c := dst[j]
				copy(dst[1:j+1], dst[:j])
				dst[0] = c
				break
			}
		}
	}
	dst[0].reason = reasonWeighted
}

// orderUsage puts first the provider with the largest share of its rate
// limits left: as its last answer's x-ratelimit-* headers said, and as
// this minute's requests and tokens against its own rpm and tpm lines
// (the smaller); one that said nothing and has no rpm or tpm counts as
// having all. Requests spread so that none reaches its limits while
// another has room.
func (ps *providerSet) orderUsage(dst []choice, states []uint8, now int64) {
	sortChoices(dst, func(a, b choice) bool {
		sa, sb := min(states[a.idx], stateFull), min(states[b.idx], stateFull)
		if sa == stateSlow {
			sa = stateOK
		}
		if sb == stateSlow {
			sb = stateOK
		}
		if sa != sb {
			return sa < sb
		}
		return ps.provs[a.idx].roomLeft(now) > ps.provs[b.idx].roomLeft(now)
	})
	dst[0].reason = reasonHeadroom
}

// roomLeft is the share of its limits the provider has left, in
// millionths: the smaller of what it said and what its rpm and tpm leave
// of this minute.
func (st *providerStats) roomLeft(now int64) int64 {
	room := st.headroom.Load()
	if (st.rpm == 0 && st.tpm == 0) || now-st.winStart.Load() >= int64(time.Minute) {
		return room
	}
	if st.rpm > 0 {
		room = min(room, max(st.rpm-st.winReqs.Load(), 0)*headroomUnknown/st.rpm)
	}
	if st.tpm > 0 {
		room = min(room, max(st.tpm-st.winTokens.Load(), 0)*headroomUnknown/st.tpm)
	}
	return room
}

// learn records what an answer's rate-limit headers say.
func (st *providerStats) learn(h http.Header, now int64) {
	if h == nil {
		return
	}
	if room, until, ok := learnLimits(h, now); ok {
		st.headroom.Store(room)
		if until > 0 {
			st.rest(until, restForLimit)
		}
	}
}

// exploreSlow moves a provider passed over as slow (and so no longer
// measured) to the front, so that one that recovered is found.
func (ps *providerSet) exploreSlow(dst []choice, states []uint8, now int64) {
	for j := 1; j < len(dst); j++ {
		if states[dst[j].idx] == stateSlow {
			c := dst[j]
			copy(dst[1:j+1], dst[:j])
			dst[0] = c
			dst[0].reason = reasonExplore
			return
		}
	}
}

// sortChoices is an insertion sort (a handful of providers, no
// allocation), stable.
func sortChoices(s []choice, less func(a, b choice) bool) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && less(s[j], s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// state is the provider's state at now: resting, full, slow (its recent
// time to first byte above slo) or ok.
func (st *providerStats) state(now, slo int64, room roomFunc) uint8 {
	switch {
	case st.restUntil.Load() > now:
		return stateResting
	case st.overLimits(now):
		return stateFull
	case room != nil && st.noRoom(room):
		return stateFull
	case slo > 0 && st.recent(now) > slo:
		return stateSlow
	}
	return stateOK
}

// noRoom reports whether the provider cannot take a request now: a
// self-hosted one with no ready replica below its target_concurrency, an
// outside one with no ready replica (its replica is being replaced).
func (st *providerStats) noRoom(room roomFunc) bool {
	free, total := room(st.name)
	if st.selfHosted {
		return free == 0
	}
	return total == 0
}

// recent is the provider's recent time to first byte, or 0 when it was
// not measured within staleAfter.
func (st *providerStats) recent(now int64) int64 {
	if now-st.sampled.Load() > int64(staleAfter) {
		return 0
	}
	return st.ttft.Load()
}

// speed is what the latency policy ranks by: the recent time to first
// byte; 0 (fastest, so that it is measured) when not measured lately;
// slowest while its last tries failed, so that a provider back from a
// rest is tried by exploration or when the others cannot answer, not
// first by every request until one fails.
func (st *providerStats) speed(now int64) int64 {
	if st.fails.Load() > 0 {
		return math.MaxInt64
	}
	return st.recent(now)
}

// overLimits reports whether this minute's requests or tokens reached the
// provider's rpm or tpm.
func (st *providerStats) overLimits(now int64) bool {
	if st.rpm == 0 && st.tpm == 0 {
		return false
	}
	if now-st.winStart.Load() >= int64(time.Minute) {
		return false // a new minute: counted afresh by took
	}
	return (st.rpm > 0 && st.winReqs.Load() >= st.rpm) || (st.tpm > 0 && st.winTokens.Load() >= st.tpm)
}

// took counts a request (and later its tokens) in the provider's minute.
func (st *providerStats) took(now, tokens int64) {
	if st.rpm == 0 && st.tpm == 0 {
		return
	}
	if ws := st.winStart.Load(); now-ws >= int64(time.Minute) && st.winStart.CompareAndSwap(ws, now) {
		st.winReqs.Store(0)
		st.winTokens.Store(0)
	}
	if tokens == 0 {
		st.winReqs.Add(1)
	}
	st.winTokens.Add(tokens)
}

// observe records an attempt's outcome: its time to first byte on an
// answer, a rest for its Retry-After on a 429, a growing rest on a
// failure.
func (st *providerStats) observe(now int64, status int, retryAfter string, ttfb time.Duration) {
	switch {
	case status == http.StatusTooManyRequests:
		st.requests[outcome429].Inc()
		st.rest(now+int64(parseRetryAfter(retryAfter, now)), restFor429)
	case status >= 500 || status == 0:
		k := outcome5xx
		if status == 0 {
			k = outcomeError
		}
		st.requests[k].Inc()
		if st.restUntil.Load() > now {
			return // one of the requests in flight when it began failing
		}
		f := min(st.fails.Add(1), 16)
		st.rest(now+int64(min(failRest<<(f-1), maxFailRest)), restForFailures)
	default:
		st.requests[outcomeOK].Inc()
		st.fails.Store(0)
		st.ttftObs.Observe(ttfb.Seconds())
		st.sample(now, int64(ttfb))
	}
}

// Why a provider rests, as GET /llm/providers/models shows it.
const (
	restFor429      = iota + 1 // a 429 and its Retry-After
	restForFailures            // failures in a row
	restForLimit               // its rate-limit headers said a limit is spent
)

var restNames = [...]string{"", "429", "failures", "limit_spent"}

// rest makes the provider rest until then, for why, unless it already
// rests longer.
func (st *providerStats) rest(until int64, why int32) {
	if st.restUntil.Load() < until {
		st.restWhy.Store(why)
		st.restUntil.Store(until)
	}
}

// sample folds a time to first byte into the recent one; after
// staleAfter without one, it replaces it.
func (st *providerStats) sample(now, ttfb int64) {
	prev := st.ttft.Load()
	if now-st.sampled.Load() > int64(staleAfter) || prev == 0 {
		st.ttft.Store(ttfb)
	} else {
		st.ttft.Store(int64(float64(prev)*(1-ewmaWeight) + float64(ttfb)*ewmaWeight))
	}
	st.sampled.Store(now)
}

// parseRetryAfter reads a Retry-After header (seconds, or an HTTP date)
// as a duration from now, bounded to 10 minutes.
func parseRetryAfter(v string, now int64) time.Duration {
	if v == "" {
		return defaultRetryAfter
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && !math.IsInf(s, 0) {
		return min(time.Duration(s*float64(time.Second)), 10*time.Minute)
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(time.Duration(t.UnixNano()-now), 0), 10*time.Minute)
	}
	return defaultRetryAfter
}
