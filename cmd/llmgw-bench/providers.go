package main

import (
	"container/heap"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llmrouter"
)

// providersBench simulates a day of traffic to a model served by several
// providers (its own GPU replicas, a cheap outside provider with a rate
// limit, a variable time to first token and outages, a dear fast one),
// once per routing policy, on a simulated clock. The policies are the
// router's own (llmrouter.ProviderOrder), told what the router would
// learn: times to first token, 429s with their Retry-After, failures,
// the replicas' free slots. Every policy sees the same requests and the
// same provider behaviour; an oracle that knows the future (each request
// to the cheapest provider that answers it within the objective) is the
// reference row.
func providersBench(args []string) error {
	fs := flag.NewFlagSet("providers", flag.ExitOnError)
	cfg := defaultDay()
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the day's requests and the providers' behaviour")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "requests per second at the day's peak (16:00), before bursts")
	fs.DurationVar(&cfg.Duration, "d", cfg.Duration, "simulated time from midnight")
	fs.DurationVar(&cfg.Objective, "objective", cfg.Objective, "latency objective: time to first token (the cost policy's latency_objective, the oracle's bound)")
	fs.IntVar(&cfg.Bursts, "bursts", cfg.Bursts, "bursts of three times the rate, 2 to 6 minutes each, in a day")
	fs.IntVar(&cfg.GPUReplicas, "gpus", cfg.GPUReplicas, "GPU replicas of the model's own (one GPU each)")
	fs.IntVar(&cfg.Slots, "slots", cfg.Slots, "requests a GPU replica takes at once (its target_concurrency)")
	fs.IntVar(&cfg.CheapRPM, "cheap-rpm", cfg.CheapRPM, "the cheap provider's rate limit, requests a minute (429 with Retry-After above it)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	_ = fs.Parse(args)
	if cfg.Rate <= 0 || cfg.Duration <= 0 || cfg.GPUReplicas < 0 || cfg.Slots <= 0 {
		return fmt.Errorf("-rate, -d and -slots must be positive and -gpus not negative")
	}
	res := simulateDay(cfg)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	res.print(os.Stdout)
	return nil
}

// dayConfig is the simulated day.
type dayConfig struct {
	Seed        uint64        `json:"seed"`
	Rate        float64       `json:"rate"`
	Duration    time.Duration `json:"duration_ns"`
	Objective   time.Duration `json:"objective_ns"`
	Bursts      int           `json:"bursts"`
	GPUReplicas int           `json:"gpus"`
	Slots       int           `json:"slots"`
	CheapRPM    int           `json:"cheap_rpm"`
}

func defaultDay() dayConfig {
	return dayConfig{Seed: 1, Rate: 3, Duration: 24 * time.Hour, Objective: time.Second, Bursts: 8,
		GPUReplicas: 2, Slots: 8, CheapRPM: 300}
}

// window is a time of the day when a provider fails: each try answers
// status (0: not reached) after the given time.
type window struct {
	from, to time.Duration
	status   int
	after    time.Duration
}

// simProvider is how a simulated provider behaves.
type simProvider struct {
	name  string
	price catalog.ProviderPrice
	// self-hosted: slots requests at once, the rest wait for a slot.
	selfHosted bool
	slots      int
	// time to first token: median × e^(sigma·z) (z drawn per request),
	// times slowBy within slow, plus the prompt at prefill tokens a
	// second; then the answer at decode tokens a second.
	median, sigma   float64
	prefill, decode float64
	slow            window
	slowBy          float64
	rpm             int // the provider's own limit: 429 above it
	outages         []window
}

// dayProviders are the model's providers in the simulated day.
func dayProviders(cfg dayConfig) []simProvider {
	h := time.Hour
	m := time.Minute
	return []simProvider{
		{name: "gpu", price: catalog.ProviderPrice{GPUHour: 2.5}, selfHosted: true, slots: cfg.GPUReplicas * cfg.Slots,
			median: 0.08, prefill: 20000, decode: 50},
		{name: "cheap", price: catalog.ProviderPrice{InputPerMillion: 0.15, OutputPerMillion: 0.6},
			median: 0.5, sigma: 0.6, prefill: 10000, decode: 80, rpm: cfg.CheapRPM,
			slow: window{from: 14 * h, to: 15 * h}, slowBy: 4,
			outages: []window{{9*h + 10*m, 9*h + 40*m, http.StatusServiceUnavailable, 100 * time.Millisecond},
				{19 * h, 19*h + 20*m, 0, 2 * time.Second}}},
		{name: "dear", price: catalog.ProviderPrice{InputPerMillion: 2.5, OutputPerMillion: 10},
			median: 0.3, sigma: 0.3, prefill: 30000, decode: 100,
			outages: []window{{22 * h, 22*h + 10*m, http.StatusServiceUnavailable, 100 * time.Millisecond}}},
	}
}

// simRequest is one request of the day, with the providers' draws.
type simRequest struct {
	at                 int64 // nanos from midnight
	prompt, completion int64
	z                  [3]float64 // each provider's time-to-first-token draw
	rnd, rnd2          float64    // the policy's draws
}

// dayRequests draws the day's requests: a daily curve (lowest at 04:00,
// highest at 16:00, 15% of the peak at night) with bursts, prompts and
// answers of log-normal lengths.
func dayRequests(cfg dayConfig) []simRequest {
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	type burst struct{ from, to float64 }
	bursts := make([]burst, cfg.Bursts)
	for i := range bursts {
		from := rng.Float64() * 24 * 3600
		bursts[i] = burst{from, from + 120 + rng.Float64()*240}
	}
	rate := func(s float64) float64 {
		r := cfg.Rate * (0.15 + 0.85*(0.5-0.5*math.Cos(2*math.Pi*(s/3600-4)/24)))
		for _, b := range bursts {
			if s >= b.from && s < b.to {
				r *= 3
			}
		}
		return r
	}
	var reqs []simRequest
	peak := cfg.Rate * 3
	for s := rng.ExpFloat64() / peak; s < cfg.Duration.Seconds(); s += rng.ExpFloat64() / peak {
		if rng.Float64()*peak >= rate(s) {
			continue
		}
		r := simRequest{at: int64(s * 1e9), rnd: rng.Float64(), rnd2: rng.Float64(),
			prompt:     logNormal(rng, 600, 1.0, 20, 32000),
			completion: logNormal(rng, 180, 0.8, 1, 4096)}
		for i := range r.z {
			r.z[i] = rng.NormFloat64()
		}
		reqs = append(reqs, r)
	}
	return reqs
}

func logNormal(rng *rand.Rand, median, sigma float64, lo, hi int64) int64 {
	return min(max(int64(median*math.Exp(sigma*rng.NormFloat64())), lo), hi)
}

// providerState is a provider's state in one run.
type providerState struct {
	busy      []int64 // self-hosted: when each slot is free
	winMinute int64   // the rate limit's minute
	winCount  int     // requests in it
	header    http.Header
}

// outcome is what a try of provider p at t (nanos from midnight) gets:
// served (its first token and its end, as durations from t) or failed
// (status, Retry-After, after fail).
type outcome struct {
	served      bool
	ttft, total time.Duration
	status      int
	retryAfter  string
	fail        time.Duration
	remaining   int // rate-limited providers: requests left this minute
	reset       time.Duration
}

// try sends r to p at t; commit false only looks (the oracle's question).
func (p *simProvider) try(st *providerState, r *simRequest, i int, t int64, commit bool) outcome {
	d := time.Duration(t)
	for _, w := range p.outages {
		if d >= w.from && d < w.to {
			return outcome{status: w.status, fail: w.after}
		}
	}
	var o outcome
	if p.rpm > 0 {
		minute := t / int64(time.Minute)
		count := st.winCount
		if minute != st.winMinute {
			count = 0
		}
		o.reset = time.Duration((minute+1)*int64(time.Minute) - t)
		if count >= p.rpm {
			secs := int64(math.Ceil(o.reset.Seconds()))
			return outcome{status: http.StatusTooManyRequests, retryAfter: strconv.FormatInt(secs, 10), fail: 30 * time.Millisecond}
		}
		if commit {
			st.winMinute, st.winCount = minute, count+1
		}
		o.remaining = p.rpm - count - 1
	}
	first := p.median * math.Exp(p.sigma*r.z[i])
	if d >= p.slow.from && d < p.slow.to {
		first *= p.slowBy
	}
	first += float64(r.prompt) / p.prefill
	o.served = true
	o.ttft = time.Duration(first * 1e9)
	o.total = o.ttft + time.Duration(float64(r.completion)/p.decode*1e9)
	if p.selfHosted {
		o = p.queue(st, t, o, commit)
	}
	return o
}

// queue makes a self-hosted try wait for the first free slot.
func (p *simProvider) queue(st *providerState, t int64, o outcome, commit bool) outcome {
	if p.slots == 0 {
		return outcome{status: http.StatusServiceUnavailable, fail: time.Millisecond}
	}
	slot := 0
	for j, b := range st.busy {
		if b < st.busy[slot] {
			slot = j
		}
	}
	wait := time.Duration(max(st.busy[slot]-t, 0))
	o.ttft += wait
	o.total += wait
	if commit {
		st.busy[slot] = t + int64(o.total)
	}
	return o
}

// free is a self-hosted provider's free and total slots at t.
func (st *providerState) free(t int64) (free, total int) {
	for _, b := range st.busy {
		if b <= t {
			free++
		}
	}
	return free, len(st.busy)
}

// simEvent is a try's end (recorded as the router records it) or a
// failover's try, at a time.
type simEvent struct {
	at   int64
	seq  int64
	req  int32
	pos  int8 // failover: the position in the request's order to try
	prov int8 // record: the provider tried
	o    outcome
}

type eventHeap []simEvent

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(simEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// providersRow is one policy's (or the oracle's) day.
type providersRow struct {
	Policy     string             `json:"policy"`
	Requests   int                `json:"requests"`
	Failed     int                `json:"failed"`
	Spent      float64            `json:"spent"`
	TokenSpent float64            `json:"spent_on_tokens"`
	TTFT50     float64            `json:"ttft_p50_s"`
	TTFT95     float64            `json:"ttft_p95_s"`
	Total50    float64            `json:"total_p50_s"`
	Total95    float64            `json:"total_p95_s"`
	Within     float64            `json:"within_objective"`
	Tries429   int                `json:"tries_429"`
	TriesDown  int                `json:"tries_failed"`
	Failovers  int                `json:"failovers"`
	Share      map[string]float64 `json:"share"`
	// OutageTries counts, per provider, its tries during its outages.
	OutageTries map[string]int `json:"outage_tries"`

	ttft, total []time.Duration
	served      []int
}

// simRun is one policy's day.
type simRun struct {
	cfg    dayConfig
	provs  []simProvider
	states []providerState
	reqs   []simRequest
	order  *llmrouter.ProviderOrder
	orders [][catalog.MaxProviders]int8
	nOrder int
	events eventHeap
	seq    int64
	clock  int64 // the time of the event or request at hand
	row    *providersRow
}

func newRow(name string, provs []simProvider, n int) *providersRow {
	row := &providersRow{Policy: name, Requests: n, Share: map[string]float64{}, OutageTries: map[string]int{},
		served: make([]int, len(provs))}
	return row
}

func newStates(provs []simProvider) []providerState {
	states := make([]providerState, len(provs))
	for i, p := range provs {
		states[i] = providerState{busy: make([]int64, p.slots), winMinute: -1, header: http.Header{}}
	}
	return states
}

// dayModel is the catalog model the policies route.
func dayModel(cfg dayConfig, policy string, provs []simProvider) *catalog.Model {
	m := &catalog.Model{Name: "chat", Routing: &catalog.Routing{Policy: policy, LatencyObjective: caddy.Duration(cfg.Objective)}}
	for _, p := range provs {
		model := "chat/" + p.name
		if p.selfHosted {
			model = "chat"
		}
		m.Providers = append(m.Providers, &catalog.Provider{Name: p.name, Model: model, Price: &p.price})
	}
	return m
}

// runPolicy runs the day under policy.
func runPolicy(cfg dayConfig, policy string, provs []simProvider, reqs []simRequest) *providersRow {
	s := &simRun{cfg: cfg, provs: provs, states: newStates(provs), reqs: reqs, row: newRow(policy, provs, len(reqs)),
		orders: make([][catalog.MaxProviders]int8, len(reqs)), nOrder: len(provs)}
	s.order = llmrouter.NewProviderOrder(dayModel(cfg, policy, provs), func(model string) bool { return model == "chat" })
	gpu := slices.IndexFunc(provs, func(p simProvider) bool { return p.selfHosted })
	room := func(model string) (int, int) {
		if model == "chat" && gpu >= 0 {
			return s.states[gpu].free(s.clock)
		}
		return 1, 1 // an outside provider's replica is always ready
	}
	var buf [catalog.MaxProviders]int
	for i := range reqs {
		s.until(reqs[i].at)
		order, _ := s.order.Order(buf[:], reqs[i].at, reqs[i].rnd, reqs[i].rnd2, room)
		for k, p := range order {
			s.orders[i][k] = int8(p)
		}
		s.try(int32(i), 0, reqs[i].at)
	}
	s.until(math.MaxInt64)
	s.row.finish(cfg, provs)
	return s.row
}

// until handles the events up to t.
func (s *simRun) until(t int64) {
	for len(s.events) > 0 && s.events[0].at <= t {
		e := heap.Pop(&s.events).(simEvent)
		s.clock = e.at
		if e.pos < 0 {
			s.record(e)
			continue
		}
		s.try(e.req, int(e.pos), e.at)
	}
	if t != math.MaxInt64 {
		s.clock = t
	}
}

func (s *simRun) push(e simEvent) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.events, e)
}

// try sends request ri to the provider at pos in its order, at t.
func (s *simRun) try(ri int32, pos int, t int64) {
	r := &s.reqs[ri]
	pi := int(s.orders[ri][pos])
	p := &s.provs[pi]
	if pos > 0 {
		s.row.Failovers++
	}
	if p.down(t) {
		s.row.OutageTries[p.name]++
	}
	o := p.try(&s.states[pi], r, pi, t, true)
	if o.served {
		s.row.serve(pi, p, r, time.Duration(t-r.at)+o.ttft, time.Duration(t-r.at)+o.total)
		s.push(simEvent{at: t + int64(o.total), req: ri, pos: -1, prov: int8(pi), o: o})
		return
	}
	if o.status == http.StatusTooManyRequests {
		s.row.Tries429++
	} else {
		s.row.TriesDown++
	}
	s.push(simEvent{at: t + int64(o.fail), req: ri, pos: -1, prov: int8(pi), o: o})
	if pos+1 < s.nOrder {
		s.push(simEvent{at: t + int64(o.fail), req: ri, pos: int8(pos + 1)})
	} else {
		s.row.Failed++
	}
}

// record tells the policy what the router learns at a try's end: the
// status, the Retry-After, the time to first token, the rate-limit
// headers, the tokens.
func (s *simRun) record(e simEvent) {
	o := e.o
	if !o.served {
		s.order.Record(int(e.prov), e.at, o.status, o.retryAfter, 0, nil, false, 0)
		return
	}
	var h http.Header
	if s.provs[e.prov].rpm > 0 {
		h = s.states[e.prov].header
		h.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(s.provs[e.prov].rpm))
		h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(o.remaining))
		h.Set("X-Ratelimit-Reset-Requests", o.reset.String())
	}
	r := &s.reqs[e.req]
	s.order.Record(int(e.prov), e.at, http.StatusOK, "", o.ttft, h, true, r.prompt+r.completion)
}

// down reports whether p is in an outage at t.
func (p *simProvider) down(t int64) bool {
	for _, w := range p.outages {
		if time.Duration(t) >= w.from && time.Duration(t) < w.to {
			return true
		}
	}
	return false
}

// serve counts a request served by provider pi.
func (row *providersRow) serve(pi int, p *simProvider, r *simRequest, ttft, total time.Duration) {
	row.served[pi]++
	row.ttft = append(row.ttft, ttft)
	row.total = append(row.total, total)
	row.TokenSpent += float64(p.price.CostMicros(r.prompt, 0, r.completion)) / 1e6
}

// finish sums the day up.
func (row *providersRow) finish(cfg dayConfig, provs []simProvider) {
	gpu := 0.0
	for _, p := range provs {
		if p.selfHosted {
			gpu += float64(cfg.GPUReplicas) * p.price.GPUHour * cfg.Duration.Hours()
		}
	}
	row.Spent = gpu + row.TokenSpent
	within := 0
	for _, d := range row.ttft {
		if d <= cfg.Objective {
			within++
		}
	}
	row.Within = float64(within) / float64(max(row.Requests, 1))
	row.TTFT50, row.TTFT95 = pct(row.ttft, 0.5).Seconds(), pct(row.ttft, 0.95).Seconds()
	row.Total50, row.Total95 = pct(row.total, 0.5).Seconds(), pct(row.total, 0.95).Seconds()
	for i, p := range provs {
		row.Share[p.name] = float64(row.served[i]) / float64(max(len(row.ttft), 1))
	}
}

// runOracle sends each request to the cheapest provider that answers it
// within the objective, knowing the outages, the rate limits, the queues
// and every time to first token; when none does, to the fastest.
func runOracle(cfg dayConfig, provs []simProvider, reqs []simRequest) *providersRow {
	states := newStates(provs)
	row := newRow("oracle", provs, len(reqs))
	rank := make([]int, len(provs))
	for i := range rank {
		rank[i] = i
	}
	slices.SortStableFunc(rank, func(a, b int) int { return cmpFloat(provs[a].price.Rank(), provs[b].price.Rank()) })
	for i := range reqs {
		r := &reqs[i]
		best, bo := -1, outcome{}
		for _, pi := range rank {
			o := provs[pi].try(&states[pi], r, pi, r.at, false)
			if !o.served {
				continue
			}
			if best < 0 || o.ttft < bo.ttft || o.ttft <= cfg.Objective && bo.ttft > cfg.Objective {
				best, bo = pi, o
			}
			if o.ttft <= cfg.Objective {
				break
			}
		}
		if best < 0 {
			row.Failed++
			continue
		}
		provs[best].try(&states[best], r, best, r.at, true)
		row.serve(best, &provs[best], r, bo.ttft, bo.total)
	}
	row.finish(cfg, provs)
	return row
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// dayPolicies are the policies compared, in the table's order.
func dayPolicies() []string {
	return []string{catalog.PolicyCost, catalog.PolicyLatency, catalog.PolicyUsage, catalog.PolicyWeighted, catalog.PolicyFirst}
}

// providersResult is the day under every policy and the oracle.
type providersResult struct {
	Config   dayConfig       `json:"config"`
	Requests int             `json:"requests"`
	Rows     []*providersRow `json:"rows"`
}

func simulateDay(cfg dayConfig) providersResult {
	provs := dayProviders(cfg)
	reqs := dayRequests(cfg)
	res := providersResult{Config: cfg, Requests: len(reqs), Rows: []*providersRow{runOracle(cfg, provs, reqs)}}
	for _, p := range dayPolicies() {
		res.Rows = append(res.Rows, runPolicy(cfg, p, provs, reqs))
	}
	return res
}

// row is the named policy's row, or nil.
func (res providersResult) row(policy string) *providersRow {
	for _, r := range res.Rows {
		if r.Policy == policy {
			return r
		}
	}
	return nil
}

func (res providersResult) print(w io.Writer) {
	c := res.Config
	fmt.Fprintf(w, "%d requests in %v (seed %d, peak %.3g/s, %d bursts), objective: first token within %v\n",
		res.Requests, c.Duration, c.Seed, c.Rate, c.Bursts, c.Objective)
	fmt.Fprintf(w, "gpu: %d replicas of %d slots at 2.50/GPU-hour; cheap: 0.15/0.60 per million, %d rpm, slow 14:00-15:00, down 09:10-09:40 (503) and 19:00-19:20 (unreachable); dear: 2.50/10 per million, down 22:00-22:10\n\n",
		c.GPUReplicas, c.Slots, c.CheapRPM)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tspent\ton tokens\tTTFT p50\tTTFT p95\ttotal p50\ttotal p95\twithin objective\t429s\tfailed tries\tfailovers\tfailed requests\tgpu/cheap/dear\tin outages\t")
	for _, r := range res.Rows {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2fs\t%.2fs\t%.2fs\t%.2fs\t%.1f%%\t%d\t%d\t%d\t%d\t%.0f/%.0f/%.0f%%\t%d/%d\t\n",
			r.Policy, r.Spent, r.TokenSpent, r.TTFT50, r.TTFT95, r.Total50, r.Total95, 100*r.Within,
			r.Tries429, r.TriesDown, r.Failovers, r.Failed, 100*r.Share["gpu"], 100*r.Share["cheap"], 100*r.Share["dear"],
			r.OutageTries["cheap"], r.OutageTries["dear"])
	}
	_ = tw.Flush()
}
