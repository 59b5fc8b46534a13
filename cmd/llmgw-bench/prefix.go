package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/llmgw/llmgw/engines/sim/prefixcache"
	"github.com/llmgw/llmgw/plugins/enginetest"
	"github.com/llmgw/llmgw/plugins/enginetest/tinygguf"
)

// prefixBench compares the prefix_affinity policy with least_outstanding
// on a multi-turn workload: conversations sharing a long system prompt,
// each turn adding a user message to the answers before it, many
// conversations interleaved. One gateway serves both policies (two
// routes) in front of the same replicas; rounds alternate the policies,
// each round with fresh conversations and a fresh system prompt, so that
// neither inherits the other's caches. With the sim engine's prefix
// cache model (a simulator) it also compares the cached share of prompt
// tokens with an oracle that knows every replica's cache.
func prefixBench(args []string) error {
	fs := flag.NewFlagSet("prefix", flag.ExitOnError)
	bin := fs.String("llmgw", "./llmgw", "the llmgw binary")
	eng := fs.String("engine", "sim", "sim (the prefix-cache simulator) or ollama (the tiny test model, made larger with -model-width)")
	replicas := fs.Int("replicas", 16, "replicas of the model")
	convs := fs.Int("conversations", 512, "conversations per round and policy")
	turns := fs.Int("turns", 12, "turns of each conversation")
	conc := fs.Int("c", 64, "conversations in flight at once")
	systemTokens := fs.Int("system-tokens", 2000, "words of the shared system prompt")
	turnTokens := fs.Int("turn-tokens", 200, "words each user turn adds")
	maxTokens := fs.Int("max-tokens", 16, "tokens of each answer")
	rounds := fs.Int("rounds", 2, "rounds; each runs both policies")
	cacheTokens := fs.Int("cache-tokens", 40000, "sim: each replica's prefix cache, in tokens")
	prefill := fs.Float64("prefill", 20000, "sim: prompt tokens per second a replica processes (uncached ones delay the first token)")
	ollamaBin := fs.String("ollama", enginetest.OllamaBin(), "ollama: the ollama binary")
	width := fs.Int("model-width", 256, "ollama: the test model's embedding width (64 is the tiny default; wider makes prefill cost more)")
	layers := fs.Int("model-layers", 4, "ollama: the test model's blocks")
	heads := fs.Int("model-heads", 4, "ollama: the test model's attention heads (without flash attention, which Ollama enables only on GPUs, a batch's attention scores take prompt tokens × used cache cells × heads floats)")
	ctxLen := fs.Int("context", 8192, "ollama: context length of each of the replica's slots")
	slotsFlag := fs.Int("slots", 0, "ollama: slots (parallel requests, each with its own cached prompt) of each replica; default -c over -replicas")
	pin := fs.Bool("pin", true, "ollama: pin each replica to a core of its own (needs as many cores as replicas)")
	nodeCores := fs.Int("node-cores", 0, "ollama: the cores the node declares, when more replicas than cores share them (with -pin=false)")
	flash := fs.Bool("flash-attention", true, "ollama: the model's flash_attention option (without it, every slot's attention costs every used cell of the replica's K/V cache)")
	_ = fs.Parse(args)
	dir, err := os.MkdirTemp("", "llmgw-bench-prefix-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var model string
	switch *eng {
	case "sim":
		model = fmt.Sprintf("model bench {\n\t\t\tengine sim\n\t\t\tmin %d\n\t\t\tmax %d\n\t\t\toption prefix_cache_tokens %d\n\t\t\toption prefill_tokens_per_second %g\n\t\t\toption tokens_per_second 2000\n\t\t\ttarget_concurrency 1000\n\t\t}",
			*replicas, *replicas, *cacheTokens, *prefill)
	case "ollama":
		if *ollamaBin == "" {
			return errors.New(enginetest.OllamaMissing)
		}
		src := filepath.Join(dir, "model.gguf")
		c := tinygguf.Default()
		c.Embd, c.FFN, c.Blocks, c.Heads, c.Context = *width, 4**width, *layers, *heads, *ctxLen
		if err := tinygguf.WriteFile(src, c); err != nil {
			return err
		}
		slots := (*conc + *replicas - 1) / *replicas
		if *slotsFlag > 0 {
			slots = *slotsFlag
		}
		node := ""
		if *pin {
			node += "\n\t\t\tpin_cores"
		}
		if *nodeCores > 0 {
			node += fmt.Sprintf("\n\t\t\tcores %d", *nodeCores)
		}
		model = fmt.Sprintf("engine ollama {\n\t\t\toption bin %s\n\t\t}\n\t\tnode {%s\n\t\t}\n\t\tmodel bench {\n\t\t\tengine ollama\n\t\t\tsource %s\n\t\t\tcontext_length %d\n\t\t\ttarget_concurrency %d\n\t\t\tresources {\n\t\t\t\tcores 1\n\t\t\t}\n\t\t\tmin %d\n\t\t\tmax %d\n\t\t\toption flash_attention %t\n\t\t}",
			*ollamaBin, node, src, *ctxLen, slots, *replicas, *replicas, *flash)
	default:
		return fmt.Errorf("-engine %q: use sim or ollama", *eng)
	}
	adminPort, err := freeTCPPort()
	if err != nil {
		return err
	}
	admin := fmt.Sprintf("127.0.0.1:%d", adminPort)
	site := "route /v1/* {\n\t\tllm_router\n\t}\n\troute /pa/* {\n\t\turi strip_prefix /pa\n\t\tllm_router {\n\t\t\tpolicy prefix_affinity\n\t\t}\n\t}\n\troute /lo/* {\n\t\turi strip_prefix /lo\n\t\tllm_router {\n\t\t\tpolicy least_outstanding\n\t\t}\n\t}"
	port, cmd, err := startGatewayAdmin(*bin, dir, "llmgw", admin, "llm {\n\t\t"+model+"\n\t}", site)
	if cmd != nil {
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	}
	if err != nil {
		return err
	}
	if err := waitReady(admin, *replicas, 3*time.Minute); err != nil {
		return err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	w := prefixWorkload{conversations: *convs, turns: *turns, conc: *conc, systemTokens: *systemTokens,
		turnTokens: *turnTokens, maxTokens: *maxTokens}
	policies := []string{"prefix_affinity", "least_outstanding"}
	paths := map[string]string{"prefix_affinity": "/pa/v1", "least_outstanding": "/lo/v1"}
	results := map[string][]*prefixRun{}
	for r := range *rounds {
		for j := range policies {
			p := policies[(r+j)%2]
			res, err := w.run(base+paths[p], uint64(r*2+(r+j)%2+1))
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			results[p] = append(results[p], res)
			fmt.Fprintf(os.Stderr, "round %d %s: %d turns in %s, ttft p50 %s, cached %.1f%%, %d errors\n", r+1, p, res.turns,
				res.elapsed.Round(time.Millisecond), pct(res.ttft, .5).Round(time.Microsecond), 100*res.cachedShare(), res.errors)
		}
	}
	fmt.Printf("\n%s, %d replicas, %d conversations of %d turns (%d in flight), a %d-word system prompt, %d words a turn, %d tokens an answer, %d rounds\n",
		*eng, *replicas, *convs, *turns, *conc, *systemTokens, *turnTokens, *maxTokens, *rounds)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tttft p50\tttft p90\tturns/s\tcached share\tanswer tokens\terrors\t")
	sum := map[string]prefixRun{}
	for _, p := range policies {
		var all prefixRun
		for _, res := range results[p] {
			all.add(res)
		}
		sum[p] = all
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.1f%%\t%.1f\t%d\t\n", p, pct(all.ttft, .5).Round(time.Microsecond), pct(all.ttft, .9).Round(time.Microsecond),
			float64(all.turns)/all.elapsed.Seconds(), 100*all.cachedShare(), float64(all.completion)/float64(max(all.turns, 1)), all.errors)
	}
	_ = tw.Flush()
	pa, lo := sum["prefix_affinity"], sum["least_outstanding"]
	fmt.Printf("prefix_affinity against least_outstanding: time to first token p50 %.2fx lower, turns per second %.2fx higher\n",
		float64(pct(lo.ttft, .5))/float64(pct(pa.ttft, .5)), (float64(pa.turns)/pa.elapsed.Seconds())/(float64(lo.turns)/lo.elapsed.Seconds()))
	if *eng == "sim" {
		var got, oracle float64
		for _, res := range results["prefix_affinity"] {
			got += res.cachedShare()
			oracle += oracleShare(res.sent, *replicas, *cacheTokens)
		}
		fmt.Printf("cached share of prompt tokens: %.1f%% against an oracle that knows every replica's cache: %.1f%% (%.2f of it)\n",
			100*got/float64(*rounds), 100*oracle/float64(*rounds), got/oracle)
		loads, err := picksPerReplica(admin)
		if err != nil {
			return err
		}
		lo, hi := loads[0], loads[len(loads)-1]
		fmt.Printf("prefix_affinity's requests per replica: min %d, max %d, max/min %.2f\n", lo, hi, float64(hi)/float64(max(lo, 1)))
	}
	return nil
}

// waitReady waits until the model has n ready replicas.
func waitReady(admin string, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		resp, err := http.Get("http://" + admin + "/llm/models")
		if err == nil {
			var ms []struct {
				Name     string
				Replicas []struct{ State string }
			}
			_ = json.NewDecoder(resp.Body).Decode(&ms)
			resp.Body.Close()
			for _, m := range ms {
				ready := 0
				for _, r := range m.Replicas {
					if r.State == "ready" {
						ready++
					}
				}
				if m.Name == "bench" && ready >= n {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the model did not have %d ready replicas within %s", n, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var picksLine = regexp.MustCompile(`^llmgw_prefix_picks_total\{[^}]*replica="([^"]+)"[^}]*\} ([0-9.e+]+)`)

// picksPerReplica reads the prefix_affinity policy's picks per replica
// from the gateway's metrics, sorted.
func picksPerReplica(admin string) ([]int, error) {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	per := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := picksLine.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			per[m[1]] += v
		}
	}
	var out []int
	for _, v := range per {
		out = append(out, int(v))
	}
	if len(out) == 0 {
		return nil, errors.New("the gateway's metrics have no llmgw_prefix_picks_total")
	}
	sort.Ints(out)
	return out, nil
}

// prefixWorkload is a round's conversations.
type prefixWorkload struct {
	conversations, turns, conc int
	systemTokens, turnTokens   int
	maxTokens                  int
}

// prefixRun is what one round of one policy measured.
type prefixRun struct {
	turns, errors              int
	elapsed                    time.Duration
	ttft                       []time.Duration
	prompt, cached, completion int64
	sent                       [][]string // the prompts in the order they were sent, as the sim's cache sees them
}

func (r *prefixRun) cachedShare() float64 { return float64(r.cached) / float64(max(r.prompt, 1)) }

func (r *prefixRun) add(o *prefixRun) {
	r.turns += o.turns
	r.errors += o.errors
	r.elapsed += o.elapsed
	r.ttft = append(r.ttft, o.ttft...)
	r.prompt += o.prompt
	r.cached += o.cached
	r.completion += o.completion
}

// benchWords are words of the test model's vocabulary (one token each).
var benchWords = strings.Fields(`the a an and of to in is it that for on with as was at by be this are from or have not but
what all were when we there can your which their said if do will each about how up out them then she many some so these
would other into has more her two like him see time could no make than first been its who now people my made over did
down only way find use may water long little very after words called just where most know sea river mountain light stone
cloud wind`)

func words(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(benchWords[rng.IntN(len(benchWords))])
	}
	return b.String()
}

type benchConv struct {
	msgs []map[string]string
	left int
	rng  *rand.Rand
}

// run runs the workload against the API at url: conversations take
// turns in a queue, conc at a time, each turn sent when the conversation's
// last one was answered.
func (w prefixWorkload) run(url string, seed uint64) (*prefixRun, error) {
	rng := rand.New(rand.NewPCG(seed, 99))
	system := words(rng, w.systemTokens)
	queue := make(chan *benchConv, w.conversations)
	for i := range w.conversations {
		c := &benchConv{left: w.turns, rng: rand.New(rand.NewPCG(seed, uint64(i)+1))}
		c.msgs = append(c.msgs, map[string]string{"role": "system", "content": system})
		queue <- c
	}
	res := &prefixRun{}
	var mu sync.Mutex
	client := newClient(w.conc)
	var wg sync.WaitGroup
	remaining := w.conversations * w.turns
	done := make(chan struct{})
	start := time.Now()
	var firstErr error
	for range w.conc {
		wg.Go(func() {
			for {
				var c *benchConv
				select {
				case c = <-queue:
				case <-done:
					return
				}
				c.msgs = append(c.msgs, map[string]string{"role": "user", "content": words(c.rng, w.turnTokens)})
				body, _ := json.Marshal(map[string]any{"model": "bench", "stream": true, "max_tokens": w.maxTokens, "temperature": 0,
					"stream_options": map[string]bool{"include_usage": true}, "messages": c.msgs})
				mu.Lock()
				res.sent = append(res.sent, simTokens(c.msgs))
				mu.Unlock()
				ttft, u, answer, err := streamTurn(client, url+"/chat/completions", body)
				mu.Lock()
				if err != nil {
					res.errors++
					if firstErr == nil {
						firstErr = err
					}
					c.msgs = c.msgs[:len(c.msgs)-1] // the turn is asked again
				} else {
					res.turns++
					res.ttft = append(res.ttft, ttft)
					res.prompt += u.PromptTokens
					res.cached += u.Cached
					res.completion += u.CompletionTokens
					c.msgs = append(c.msgs, map[string]string{"role": "assistant", "content": answer})
					c.left--
					remaining--
				}
				if remaining == 0 {
					close(done)
				}
				errs := res.errors
				mu.Unlock()
				if errs > 100 {
					return
				}
				if c.left > 0 {
					queue <- c
				}
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	if res.errors > 100 {
		return res, fmt.Errorf("%d errors, the first: %v", res.errors, firstErr)
	}
	return res, nil
}

// simTokens are the prompt's tokens as the sim's prefix cache sees them.
func simTokens(msgs []map[string]string) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, "<|"+m["role"]+"|>")
		out = append(out, strings.Fields(m["content"])...)
	}
	return out
}

type turnUsage struct {
	PromptTokens, CompletionTokens, Cached int64
}

// streamTurn sends one streamed request and returns the time to its
// first content, its usage and its text.
func streamTurn(c *http.Client, url string, body []byte) (time.Duration, turnUsage, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, turnUsage{}, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return 0, turnUsage{}, "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var (
		ttft   time.Duration
		text   strings.Builder
		u      turnUsage
		sawEnd bool
	)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			sawEnd = true
			break
		}
		var ch struct {
			Choices []struct {
				Delta struct{ Content string }
			}
			Usage *struct {
				PromptTokens        int64 `json:"prompt_tokens"`
				CompletionTokens    int64 `json:"completion_tokens"`
				PromptTokensDetails *struct {
					CachedTokens int64 `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		if json.Unmarshal(data, &ch) != nil {
			continue
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != "" && ttft == 0 {
				ttft = time.Since(start)
			}
			text.WriteString(c.Delta.Content)
		}
		if ch.Usage != nil {
			u.PromptTokens, u.CompletionTokens = ch.Usage.PromptTokens, ch.Usage.CompletionTokens
			if d := ch.Usage.PromptTokensDetails; d != nil {
				u.Cached = d.CachedTokens
			}
		}
	}
	if !sawEnd {
		return 0, u, "", fmt.Errorf("the stream ended without [DONE]: %v", sc.Err())
	}
	if ttft == 0 {
		ttft = time.Since(start)
	}
	return ttft, u, strings.TrimSpace(text.String()), nil
}

// oracleShare replays the prompts, in the order they were sent, against
// simulated caches of every replica, each sent where the longest prefix
// is cached (the least used replica among equals) within the balance
// asked of the policy, and returns the share of prompt tokens cached,
// counted as the sim counts them.
func oracleShare(sent [][]string, replicas, cacheTokens int) float64 {
	caches := make([]*prefixcache.Cache, replicas)
	used := make([]int, replicas)
	for i := range caches {
		caches[i] = prefixcache.New(cacheTokens)
	}
	var prompt, cached int64
	for _, toks := range sent {
		blocks := prefixcache.Blocks(toks)
		// The longest cached prefix, among the replicas within the
		// balance asked of the policy (at most 1.3 times the least used
		// one's requests); the least used among equals.
		least := slices.Min(used)
		best, bestN := -1, -1
		for i, c := range caches {
			if float64(used[i]) > 1.3*float64(least+1) {
				continue
			}
			if n := c.Peek(blocks); n > bestN || (n == bestN && used[i] < used[best]) {
				best, bestN = i, n
			}
		}
		used[best]++
		msgs := 0
		for _, t := range toks {
			if strings.HasPrefix(t, "<|") {
				msgs++
			}
		}
		p := int64(len(toks) - msgs + 3*msgs)
		prompt += p
		cached += min(int64(caches[best].Use(blocks)*prefixcache.BlockTokens), p)
	}
	return float64(cached) / float64(max(prompt, 1))
}
