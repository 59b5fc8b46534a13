package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// benchClusterSecret is the bench cluster's node-to-node credential.
const benchClusterSecret = "llmgw-bench-cluster-secret-0123456789abcdef"

// clusterNode is one llmgw node of the bench cluster.
type clusterNode struct {
	name  string
	port  int // front end, on all addresses
	admin string
	cmd   *exec.Cmd
}

func (n *clusterNode) url() string { return fmt.Sprintf("http://127.0.0.1:%d/v1", n.port) }

// clusterBench measures, with Redis and llmgw nodes on loopback, what the
// node-to-node hop costs against one plain Caddy reverse_proxy hop, and
// how fast a change made on one node's admin API shows on another's.
func clusterBench(args []string) error {
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	bin := fs.String("llmgw", "./llmgw", "the llmgw binary (its reverse_proxy is plain Caddy's)")
	dur := fs.Duration("d", 1500*time.Millisecond, "duration of each measurement")
	rounds := fs.Int("rounds", 4, "interleaved rounds; medians are reported")
	conc := fs.String("c", "1,64", "concurrencies")
	tokens := fs.Int("max-tokens", 20, "tokens per answer (stream chunks)")
	ttft := fs.Duration("ttft", 0, "the sim model's time to first token")
	streams := fs.String("stream", "false,true", "non-streamed and/or streamed scenarios")
	changes := fs.Int("changes", 100, "changes made on node A whose arrival on node C is timed (0: skip)")
	keys := fs.Int("keys", 10, "keys minted on node A and tried at once on node C")
	wait := fs.Duration("change-timeout", 5*time.Second, "how long to wait for a change to show on node C before counting it lost")
	hop := fs.Bool("hop", true, "measure the remote hop")
	keep := fs.Bool("keep", false, "keep the nodes' directories (their Caddyfile and log) and say where")
	_ = fs.Parse(args)
	dir, err := os.MkdirTemp("", "llmgw-bench-cluster-")
	if err != nil {
		return err
	}
	if *keep {
		defer fmt.Fprintln(os.Stderr, "the nodes' Caddyfiles and logs are kept in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
			_ = p.Wait()
		}
	}()
	redisURL, cmd, err := startRedis(dir)
	if cmd != nil {
		procs = append(procs, cmd)
	}
	if err != nil {
		return err
	}
	startNode := func(name, ip, site string) (*clusterNode, error) {
		peer, err := freeTCPPort()
		if err != nil {
			return nil, err
		}
		admin, err := freeTCPPort()
		if err != nil {
			return nil, err
		}
		global := fmt.Sprintf("llm {\n\t\tcluster {\n\t\t\tredis %s\n\t\t\tnode %s\n\t\t\tadvertise %s:%d\n\t\t\tsecret %s\n"+
			"\t\t\theartbeat 250ms\n\t\t\tnode_ttl 2s\n\t\t}\n\t\tmodel bench {\n\t\t\tengine sim\n\t\t\toption ttft %s\n"+
			"\t\t\tmin 1\n\t\t\tmax 1\n\t\t}\n%s\t}", redisURL, name, ip, peer, benchClusterSecret, *ttft, benchTenancy)
		n := &clusterNode{name: name, admin: fmt.Sprintf("127.0.0.1:%d", admin)}
		fmt.Fprintf(os.Stderr, "starting node %s (node-to-node on %s:%d)\n", name, ip, peer)
		n.port, n.cmd, err = startGatewayAdmin(*bin, dir, "node "+name, n.admin, global, site)
		if n.cmd != nil {
			procs = append(procs, n.cmd)
		}
		return n, err
	}
	router := "route /v1/* {\n\t\tllm_router\n\t}"
	a, err := startNode("A", "127.0.0.2", router)
	if err != nil {
		return err
	}
	b, err := startNode("B", "127.0.0.3", router)
	if err != nil {
		return err
	}
	// Drain A: the one replica runs on B, and A reaches it through B.
	if code, body, err := adminDo(a, "POST", "/llm/nodes/A/drain", ""); err != nil || code != 200 {
		return fmt.Errorf("draining node A: %d %s %v", code, body, err)
	}
	var direct string
	err = waitUntil(30*time.Second, "the replica of bench to be ready on B only, as A and B see it", func() bool {
		for _, n := range []*clusterNode{a, b} {
			m, code, err := modelOn(n, "bench")
			if err != nil || code != 200 || len(m.Replicas) != 1 || m.Replicas[0].Node != "B" || m.Replicas[0].State != "ready" {
				return false
			}
			if n == b {
				direct = m.Replicas[0].URL
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	if *hop {
		caddyPort, cmd, err := startGateway(*bin, dir, "caddy reverse_proxy", "", fmt.Sprintf("reverse_proxy 127.0.0.1:%d", b.port))
		if cmd != nil {
			procs = append(procs, cmd)
		}
		if err != nil {
			return err
		}
		bpid, apid := b.cmd.Process.Pid, a.cmd.Process.Pid
		targets := []target{
			{name: "sim replica directly", url: strings.TrimSuffix(direct, "/v1") + "/v1"},
			{name: "(a) into B, local replica", url: b.url(), pids: []int{bpid}},
			{name: "(b) into A, replica on B", url: a.url(), pids: []int{apid, bpid}},
			{name: "(c) Caddy reverse_proxy → B", url: fmt.Sprintf("http://127.0.0.1:%d/v1", caddyPort), pids: []int{cmd.Process.Pid, bpid}},
		}
		fmt.Println("remote hop: cpu/req counts the llmgw processes a request passes: (a) B, (b) A+B, (c) Caddy+B")
		for _, c := range strings.Split(*conc, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(c))
			if err != nil {
				return fmt.Errorf("-c: %w", err)
			}
			for _, s := range strings.Split(*streams, ",") {
				stream, err := strconv.ParseBool(strings.TrimSpace(s))
				if err != nil {
					return fmt.Errorf("-stream: %w", err)
				}
				cfg := loadConfig{Model: "bench", Concurrency: n, Duration: *dur, Stream: stream, MaxTokens: *tokens, Key: benchKey}
				samples, err := measure(cfg, targets, *rounds)
				if err != nil {
					return err
				}
				if err := printHop(os.Stdout, cfg, targets, *rounds, samples); err != nil {
					return err
				}
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	if *changes <= 0 && *keys <= 0 {
		return nil
	}
	c, err := startNode("C", "127.0.0.4", "route /v1/* {\n\t\tllm_quota\n\t\tllm_router\n\t}")
	if err != nil {
		return err
	}
	return propagation(os.Stdout, a, c, *changes, *keys, *wait)
}

// printHop prints one scenario of the remote hop: each target against
// (a), and the hop's added latency and CPU over plain Caddy's.
func printHop(w io.Writer, cfg loadConfig, targets []target, rounds int, samples [][]sample) error {
	fmt.Fprintf(w, "\nconcurrency %d, stream %t, %d rounds of %s (medians)\n", cfg.Concurrency, cfg.Stream, rounds, cfg.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tp50\tadded p50\tttfb p50\tadded ttfb\treq/s\tcpu/req\tadded cpu/req\t")
	med := make([]sample, len(samples))
	for i := range samples {
		med[i] = median(samples[i])
	}
	local := med[1]
	for i, t := range targets {
		m := med[i]
		added, addedTTFB, cpu, addedCPU := "-", "-", "-", "-"
		ttfb := "-"
		if cfg.Stream {
			ttfb = us(m.ttfb)
		}
		if i > 1 {
			added = signedUS(m.p50 - local.p50)
			if cfg.Stream {
				addedTTFB = signedUS(m.ttfb - local.ttfb)
			}
		}
		if len(t.pids) > 0 {
			cpu = us(m.cpu)
			if i > 1 {
				addedCPU = signedUS(m.cpu - local.cpu)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t\n", t.name, us(m.p50), added, ttfb, addedTTFB, m.rps, cpu, addedCPU)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	hop, caddy := med[2], med[3]
	lat := hopRatio(hop.p50-local.p50, caddy.p50-local.p50)
	cpu := hopRatio(hop.cpu-local.cpu, caddy.cpu-local.cpu)
	fmt.Fprintf(w, "  remote hop (b-a) against one plain Caddy hop (c-a), medians: latency %s against %s = %s, cpu/req %s against %s = %s\n",
		signedUS(hop.p50-local.p50), signedUS(caddy.p50-local.p50), fmtRatio(lat),
		signedUS(hop.cpu-local.cpu), signedUS(caddy.cpu-local.cpu), fmtRatio(cpu))
	// b-a <= c-a is b <= c: round by round, (b) over (c) in the same
	// round, with how much of it is the machine's noise.
	if len(samples[2]) > 1 {
		lats := make([]float64, len(samples[2]))
		cpus := make([]float64, len(samples[2]))
		for r := range lats {
			lats[r] = float64(samples[2][r].p50) / float64(samples[3][r].p50)
			cpus[r] = float64(samples[2][r].cpu) / float64(samples[3][r].cpu)
		}
		lm, lf := geoMeanCI(lats)
		cm, cf := geoMeanCI(cpus)
		fmt.Fprintf(w, "  (b) over (c) round by round (b-a <= c-a is b/c <= 1): latency %.3f (95%% CI %.3f-%.3f), cpu/req %.3f (95%% CI %.3f-%.3f)\n",
			lm, lm/lf, lm*lf, cm, cm/cf, cm*cf)
		fmt.Fprintf(w, "  bar, the remote hop costs at most one plain Caddy hop: latency %s, cpu/req %s\n", verdict(lm, lf), verdict(cm, cf))
	}
	return nil
}

// hopRatio is what the remote hop adds over what a Caddy hop adds; a hop
// that adds nothing (or less than nothing, in the noise) is 0, and
// against a Caddy hop that adds nothing any cost is infinite.
func hopRatio(hop, caddy time.Duration) float64 {
	switch {
	case hop <= 0:
		return 0
	case caddy <= 0:
		return math.Inf(1)
	}
	return float64(hop) / float64(caddy)
}

func fmtRatio(r float64) string {
	if math.IsInf(r, 1) {
		return "inf"
	}
	return fmt.Sprintf("%.2fx", r)
}

// verdict says whether a ratio whose 95% confidence interval is mean/f
// to mean*f is at most 1.
func verdict(mean, f float64) string {
	switch {
	case mean*f <= 1:
		return "met"
	case mean/f > 1:
		return "over"
	case mean <= 1:
		return "met, within the noise"
	}
	return "over, within the noise"
}

func signedUS(d time.Duration) string {
	if d >= 0 {
		return "+" + us(d)
	}
	return us(d)
}

// summary is what a lost change's model looks like on the node that
// missed it.
func summary(m modelStatus) string {
	canary := "none"
	if m.Canary != nil {
		canary = fmt.Sprintf("%s %g", m.Canary.Model, m.Canary.Share)
	}
	return fmt.Sprintf("(state %s: %s; min %d, max %d, canary %s)", m.State, m.Reason, m.Min, m.Max, canary)
}

// modelStatus is what the bench reads of GET /llm/models/<name>.
type modelStatus struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Reason string `json:"reason"`
	Min    int    `json:"min"`
	Max    int    `json:"max"`
	Canary *struct {
		Model string  `json:"model"`
		Share float64 `json:"share"`
	} `json:"canary"`
	Replicas []struct {
		URL   string `json:"url"`
		State string `json:"state"`
		Node  string `json:"node"`
	} `json:"replicas"`
}

// adminClient has its own connections, kept alive between polls.
var adminClient = &http.Client{Timeout: 10 * time.Second}

func adminDo(n *clusterNode, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, "http://"+n.admin+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Llmgw-Actor", "llmgw-bench")
	resp, err := adminClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// modelOn is node n's view of a model, with the status code of the GET.
func modelOn(n *clusterNode, name string) (modelStatus, int, error) {
	var m modelStatus
	code, b, err := adminDo(n, "GET", "/llm/models/"+name, "")
	if err == nil && code == 200 {
		err = json.Unmarshal(b, &m)
	}
	return m, code, err
}

func waitUntil(limit time.Duration, what string, ok func() bool) error {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ok() {
			return nil
		}
	}
	return fmt.Errorf("waited %s for %s", limit, what)
}

// change is one admin change made on a node and how another node shows
// it: seen says whether a model's status (and the GET's status code)
// holds the change.
type change struct {
	kind, model, method, path, body string
	seen                            func(m modelStatus, code int) bool
}

// changePlan is n changes: a runtime model (min 0, so nothing starts) is
// added, rescaled, given a canary, stopped, started, its canary taken
// away, rescaled and removed, then the next model, and so on.
func changePlan(n int) []change {
	var out []change
	for k := 0; len(out) < n; k++ {
		m := fmt.Sprintf("prop%d", k)
		p := "/llm/models/" + m
		scale := func(max int) change {
			return change{"scale", m, "POST", p + "/scale", fmt.Sprintf(`{"min":0,"max":%d}`, max),
				func(s modelStatus, code int) bool { return code == 200 && s.Max == max }}
		}
		canary := func(share float64) change {
			return change{"canary", m, "POST", p + "/settings", fmt.Sprintf(`{"canary":{"model":"bench","share":%g}}`, share),
				func(s modelStatus, code int) bool { return code == 200 && s.Canary != nil && s.Canary.Share == share }}
		}
		out = append(out,
			change{"add", m, "POST", "/llm/models", fmt.Sprintf(`{"name":%q,"engine":"sim","scaling":{"min":0,"max":1}}`, m),
				func(s modelStatus, code int) bool { return code == 200 }},
			scale(2), canary(0.1), scale(3), canary(0.25),
			change{"stop", m, "POST", p + "/stop", "",
				func(s modelStatus, code int) bool { return code == 200 && s.State == "stopped" }},
			change{"start", m, "POST", p + "/start", "",
				func(s modelStatus, code int) bool { return code == 200 && s.State != "stopped" }},
			change{"canary", m, "POST", p + "/settings", `{"canary":{"model":"","share":0}}`,
				func(s modelStatus, code int) bool { return code == 200 && s.Canary == nil }},
			scale(4),
			change{"remove", m, "DELETE", p, "",
				func(s modelStatus, code int) bool { return code == 404 }},
		)
	}
	return out[:n]
}

// propagation makes changes on node a and times how long node c takes
// to show each, then mints keys on a and tries each on c at once.
func propagation(w io.Writer, a, c *clusterNode, changes, keys int, wait time.Duration) error {
	plan := changePlan(changes)
	var sent, answered []time.Duration
	var lost []string // changes C did not show within wait
	byKind := map[string][]time.Duration{}
	var kinds []string
	for i, ch := range plan {
		t0 := time.Now()
		code, body, err := adminDo(a, ch.method, ch.path, ch.body)
		t1 := time.Now()
		if err != nil || code/100 != 2 {
			return fmt.Errorf("change %d (%s %s %s) on A: %d %s %v", i+1, ch.method, ch.path, ch.body, code, body, err)
		}
		for {
			m, code, err := modelOn(c, ch.model)
			if err == nil && ch.seen(m, code) {
				break
			}
			if time.Since(t0) > wait {
				lost = append(lost, fmt.Sprintf("change %d (%s %s %s): C shows %d %s", i+1, ch.method, ch.path, ch.body, code, summary(m)))
				break
			}
			time.Sleep(time.Millisecond)
		}
		t2 := time.Now()
		sent = append(sent, t2.Sub(t0))
		answered = append(answered, t2.Sub(t1))
		if _, ok := byKind[ch.kind]; !ok {
			kinds = append(kinds, ch.kind)
		}
		byKind[ch.kind] = append(byKind[ch.kind], t2.Sub(t0))
	}
	if len(plan) > 0 {
		fmt.Fprintf(w, "\npropagation: %d changes made on node A's admin API, each timed until node C's GET /llm/models/<name> shows it\n", len(plan))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "changes\tn\tp50\tp99\tmax\t")
		row := func(name string, d []time.Duration) {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", name, len(d), ms(pct(d, .5)), ms(pct(d, .99)), ms(slices.Max(d)))
		}
		row("all, from the request to A", sent)
		row("all, from A's answer", answered)
		for _, k := range kinds {
			row(k+", from the request to A", byKind[k])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		bar := "met"
		if pct(sent, .99) > time.Second {
			bar = "over"
		}
		fmt.Fprintf(w, "  bar, p99 at most 1s: %s (p99 %s)\n", bar, ms(pct(sent, .99)))
		if len(lost) > 0 {
			fmt.Fprintf(w, "  %d changes did not show on C within %s (counted at that time above; the next change to the model can mend them):\n", len(lost), wait)
			for _, l := range lost {
				fmt.Fprintln(w, "   ", l)
			}
		}
	}
	if keys <= 0 {
		return nil
	}
	var first int
	var accepted []time.Duration
	refusal := "" // the first answer of C that refused a key
	for i := range keys {
		t0 := time.Now()
		code, body, err := adminDo(a, "POST", "/llm/keys", fmt.Sprintf(`{"project":"bench/bench/bench","id":"prop-%d-%d"}`, time.Now().UnixNano(), i))
		if err != nil || code/100 != 2 {
			return fmt.Errorf("minting a key on A: %d %s %v", code, body, err)
		}
		var minted struct {
			Secret string `json:"secret"`
		}
		if err := json.Unmarshal(body, &minted); err != nil || minted.Secret == "" {
			return fmt.Errorf("minting a key on A: no secret in %s", body)
		}
		for try := 0; ; try++ {
			code, answer, err := askOnce(c, minted.Secret)
			if err != nil {
				return err
			}
			if code == 200 {
				if try == 0 {
					first++
				}
				break
			}
			if refusal == "" {
				refusal = fmt.Sprintf("%d %s", code, bytes.TrimSpace(answer))
			}
			if time.Since(t0) > 30*time.Second {
				return fmt.Errorf("a key minted on A was refused by C for 30s (last status %d)", code)
			}
			time.Sleep(time.Millisecond)
		}
		accepted = append(accepted, time.Since(t0))
	}
	fmt.Fprintf(w, "keys: %d minted on A; %d accepted by C on the very next request; mint to accepted answer p50 %s, max %s\n",
		keys, first, ms(pct(accepted, .5)), ms(slices.Max(accepted)))
	if refusal != "" {
		fmt.Fprintf(w, "  C's first refusal of a key minted on A: %s\n", refusal)
	}
	return nil
}

// askOnce sends node n one chat request with key and returns its status
// and answer.
func askOnce(n *clusterNode, key string) (int, []byte, error) {
	req, err := http.NewRequest("POST", n.url()+"/chat/completions",
		strings.NewReader(`{"model":"bench","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := adminClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("asking node %s: %w", n.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + "ms"
}
