package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type loadConfig struct {
	URL         string
	Model       string
	Concurrency int
	Duration    time.Duration
	Requests    int
	Stream      bool
	MaxTokens   int
	Key         string
	// PromptBytes, when set, makes the user message about that long:
	// prose with an email address and a card number in every kilobyte.
	PromptBytes int
	// Rate, when set, paces the clients to that many requests per second
	// in all (each request starts at its slot, or at once when late), so
	// targets are compared doing the same work per second rather than
	// each at its own saturation.
	Rate float64
	// Unique, when set, gives every request a question no request asked
	// before, so a cache misses every time.
	Unique bool
	// API is the API the requests speak: "" (chat completions),
	// "responses" or "messages"; the question and answer length are the
	// same in each.
	API string
}

type result struct {
	OK, Errors int
	FirstErr   string
	Elapsed    time.Duration
	Latency    []time.Duration // to last byte
	TTFB       []time.Duration // streams: to the first content event
}

func newClient(conc int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: conc * 2, MaxConnsPerHost: 0, DisableCompression: true,
	}, Timeout: 5 * time.Minute}
}

func (cfg loadConfig) body() []byte {
	prompt := "Write a short poem about the sea and the mountains, in four lines."
	if cfg.PromptBytes > 0 {
		prompt = longPrompt(cfg.PromptBytes)
	}
	return cfg.request(prompt)
}

// request is the body asking prompt in cfg's API.
func (cfg loadConfig) request(prompt string) []byte {
	const system = "You are a helpful assistant."
	switch cfg.API {
	case "responses":
		return fmt.Appendf(nil, `{"model":%q,"stream":%t,"max_output_tokens":%d,"store":false,"instructions":%q,"input":%q}`,
			cfg.Model, cfg.Stream, cfg.MaxTokens, system, prompt)
	case "messages":
		return fmt.Appendf(nil, `{"model":%q,"stream":%t,"max_tokens":%d,"system":%q,"messages":[{"role":"user","content":%q}]}`,
			cfg.Model, cfg.Stream, cfg.MaxTokens, system, prompt)
	}
	return fmt.Appendf(nil, `{"model":%q,"stream":%t,"max_tokens":%d,"messages":[{"role":"system","content":%q},{"role":"user","content":%q}]}`,
		cfg.Model, cfg.Stream, cfg.MaxTokens, system, prompt)
}

// path is the endpoint of cfg's API, and the line that ends its streams.
func (cfg loadConfig) path() (string, []byte) {
	switch cfg.API {
	case "responses":
		return "/responses", []byte("event: response.completed")
	case "messages":
		return "/messages", []byte("event: message_stop")
	}
	return "/chat/completions", doneEvent
}

// responseIncomplete also ends a Responses stream: the answer was cut at
// max_output_tokens (the sim's answers are, at -max-tokens).
var responseIncomplete = []byte("event: response.incomplete")

// uniqueSeq numbers the unique questions of a process.
var uniqueSeq atomic.Int64

// uniqueBody is a request with a question asked once: a few words from a
// vocabulary of common ones and a serial number, as unique prompts that
// share words with many others.
func (cfg loadConfig) uniqueBody() []byte {
	n := uniqueSeq.Add(1)
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	words := make([]string, 4+rng.IntN(5))
	for i := range words {
		words[i] = uniqueVocabulary[rng.IntN(len(uniqueVocabulary))]
	}
	return cfg.request(fmt.Sprintf("How do I %s for ticket %d?", strings.Join(words, " "), n))
}

var uniqueVocabulary = strings.Fields(`account address airport answer apple bank battery bill book bread budget
	cable camera car card cat chair change check child city class clean cloud code coffee color computer cook
	country course customer data date day desk dinner doctor dog door download drive email engine error exam
	face family farm file film fish flight floor flower food friend game garden gift glass hair hand health
	heat holiday home hotel house ice idea image insurance internet invoice job key kitchen lamp language
	laptop law lesson letter light list loan lock map market meal meeting menu message milk model money month
	movie music network news note number office oil order page paint paper park party password payment pen
	phone photo piano picture plan plant plate player pocket policy pool post price printer problem project
	question radio rain recipe record report restaurant river road room rule salary school screen search
	season seat server service shirt shoe shop signal skill sleep snow software song sound soup space sport
	staff station store story street student subject sugar summer system table tax tea teacher team test
	ticket time tool town toy train travel tree trip truck user vacation video village visa voice wall
	watch water weather website week window winter word work world year`)

// longPrompt is n bytes of prose, each kilobyte holding an email address
// and a card number, as prompts that guardrails redact do.
func longPrompt(n int) string {
	const para = "Please summarise the quarterly report for the operations team. Revenue grew in every region, " +
		"costs fell after the move to the new data centre, and the support queue is shorter than last year. " +
		"Questions go to ops-lead@example.com; the corporate card 4111 1111 1111 1111 pays for the offsite. " +
		"The board meets on Tuesday to discuss hiring, the roadmap for the next two quarters, and the budget for " +
		"training. Keep the summary under two hundred words, use plain language, and list three risks with an owner " +
		"for each. Mention the customer survey results and the uptime figures from the monitoring dashboards. "
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(para)
	}
	return b.String()[:n]
}

// run drives the URL with cfg.Concurrency closed-loop clients.
func run(cfg loadConfig) (*result, error) {
	client := newClient(cfg.Concurrency)
	body := cfg.body()
	path, done := cfg.path()
	url := strings.TrimRight(cfg.URL, "/") + path
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	defer cancel()
	if cfg.Requests > 0 {
		ctx, cancel = context.WithCancel(context.Background())
		defer cancel()
	}
	var (
		mu   sync.Mutex
		res  = &result{}
		left = cfg.Requests
		wg   sync.WaitGroup
	)
	start := time.Now()
	var slot int64
	take := func() bool {
		mu.Lock()
		if cfg.Requests == 0 && ctx.Err() != nil || cfg.Requests > 0 && left == 0 {
			mu.Unlock()
			return false
		}
		left--
		n := slot
		slot++
		mu.Unlock()
		if cfg.Rate > 0 {
			at := start.Add(time.Duration(float64(n) / cfg.Rate * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return false
				}
			}
		}
		return true
	}
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for take() {
				b := body
				if cfg.Unique {
					b = cfg.uniqueBody()
				}
				lat, ttfb, err := one(ctx, client, url, cfg.Key, b, cfg.Stream, done)
				mu.Lock()
				switch {
				case err != nil && ctx.Err() != nil && cfg.Requests == 0:
					// cut off by the end of the run; not counted
				case err != nil:
					res.Errors++
					if res.FirstErr == "" {
						res.FirstErr = err.Error()
					}
				default:
					res.OK++
					res.Latency = append(res.Latency, lat)
					if cfg.Stream {
						res.TTFB = append(res.TTFB, ttfb)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	client.CloseIdleConnections()
	if res.OK == 0 {
		return res, fmt.Errorf("no request succeeded: %s", res.FirstErr)
	}
	return res, nil
}

var doneEvent = []byte("data: [DONE]")

// one sends a request; a stream must end with the line done starts.
func one(ctx context.Context, c *http.Client, url, key string, body []byte, stream bool, doneLine []byte) (lat, ttfb time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if !stream {
		_, err = io.Copy(io.Discard, resp.Body)
		return time.Since(start), 0, err
	}
	br := bufio.NewReader(resp.Body)
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if ttfb == 0 && bytes.HasPrefix(line, []byte("data:")) {
			ttfb = time.Since(start)
		}
		if bytes.HasPrefix(line, doneLine) || bytes.HasPrefix(line, responseIncomplete) {
			done = true
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && done {
				return time.Since(start), ttfb, nil
			}
			if errors.Is(err, io.EOF) {
				return 0, 0, fmt.Errorf("stream ended without %s", doneLine)
			}
			return 0, 0, err
		}
	}
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// geoMeanCI returns the geometric mean of ratios and the factor that
// bounds its 95% confidence interval (mean/f to mean*f), from the
// spread of their logarithms.
func geoMeanCI(ratios []float64) (mean, factor float64) {
	n := float64(len(ratios))
	var sum, sq float64
	for _, r := range ratios {
		sum += math.Log(r)
	}
	m := sum / n
	for _, r := range ratios {
		d := math.Log(r) - m
		sq += d * d
	}
	if len(ratios) < 2 {
		return math.Exp(m), math.Inf(1)
	}
	se := math.Sqrt(sq/(n-1)) / math.Sqrt(n)
	return math.Exp(m), math.Exp(1.96 * se)
}

func (r *result) rps() float64 { return float64(r.OK) / r.Elapsed.Seconds() }

func (r *result) print(w io.Writer, cfg loadConfig) {
	fmt.Fprintf(w, "%s c=%d stream=%t: %d ok, %d errors in %s, %.0f req/s\n",
		cfg.URL, cfg.Concurrency, cfg.Stream, r.OK, r.Errors, r.Elapsed.Round(time.Millisecond), r.rps())
	fmt.Fprintf(w, "latency p50 %s p90 %s p99 %s\n", us(pct(r.Latency, .5)), us(pct(r.Latency, .9)), us(pct(r.Latency, .99)))
	if cfg.Stream {
		fmt.Fprintf(w, "ttfb    p50 %s p90 %s p99 %s\n", us(pct(r.TTFB, .5)), us(pct(r.TTFB, .9)), us(pct(r.TTFB, .99)))
	}
	if r.FirstErr != "" {
		fmt.Fprintf(w, "first error: %s\n", r.FirstErr)
	}
}

func us(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds()), 'f', 0, 64) + "µs"
}

type pidList []int

func (p *pidList) String() string { return fmt.Sprint(*p) }
func (p *pidList) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return err
	}
	*p = append(*p, n)
	return nil
}

// cpuTimes reads utime+stime of each pid from /proc.
func cpuTimes(pids []int) []time.Duration {
	out := make([]time.Duration, len(pids))
	for i, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[i] = time.Duration(ut+st) * (time.Second / clockTicks)
	}
	return out
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100
