package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// benchGuard is the guardrails measured: PII (redacted on input, masked
// on output) and a regular expression, on the prompt and the answer.
const benchGuard = `			pii {
				on input output
			}
			regex {
				deny codename "(?i)project\\s+(zeus|hera)"
				on input output
			}
`

// entryBytes is about what llm_cache counts for one of the load's
// questions with its answer (its stats' bytes over entries).
const entryBytes = 1490

// gateway is an llmgw config measured: its site block, its global llm
// option, the Redis it counts in, and how many unique questions its cache
// holds before it is measured.
type gateway struct {
	name, site, global, redis string
	fill                      int
}

// pipelineGateways are the whole request path, each with a cache
// filled with one of sizes (comma-separated) questions. With steady, the
// cache's max_memory holds about that many questions (entryBytes each,
// as the cache counts them), so that every answer kept evicts another, as
// in a cache that has run for a while; without, it has room to grow.
// admission is llm_cache's (frequency, its default, or all).
func pipelineGateways(sizes, llmApp string, steady bool, admission string) []gateway {
	var out []gateway
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			continue
		}
		mem := "2GiB"
		if steady {
			mem = strconv.Itoa(max(1, n*entryBytes>>20)) + "MiB"
		}
		if admission != "" && admission != "frequency" {
			mem += "\n\t\t\tadmission " + admission
		}
		site := "route /v1/* {\n\t\tllm_quota\n\t\tllm_guardrails {\n\t\t\tpii {\n\t\t\t\ton input\n\t\t\t}\n" +
			"\t\t\tregex {\n\t\t\t\tdeny codename \"(?i)project\\s+(zeus|hera)\"\n\t\t\t\ton input\n\t\t\t}\n\t\t}\n" +
			"\t\tllm_cache {\n\t\t\tmax_memory " + mem + "\n\t\t\tsemantic\n\t\t}\n\t\tllm_router\n\t}"
		if len(out) == 0 { // what the cache alone adds, at the first size
			alone := "route /v1/* {\n\t\tllm_cache {\n\t\t\tmax_memory " + mem + "\n\t\t\tsemantic\n\t\t}\n\t\tllm_router\n\t}"
			out = append(out, gateway{name: fmt.Sprintf("+ llm_cache semantic, %dk", n/1000), site: alone, global: llmApp, fill: n})
		}
		out = append(out, gateway{name: fmt.Sprintf("pipeline, cache of %dk", n/1000), site: site, global: llmApp, fill: n})
	}
	return out
}

// target is one way to reach the sim replica.
type target struct {
	name string
	url  string
	pids []int // processes whose CPU is counted, summed; none for none
	// redis is the address of the Redis the target counts in, whose
	// read events per request (round trips) are reported; "" for none.
	redis string
	// api is the API the target's requests speak ("": chat completions).
	api string
}

type sample struct {
	p50, ttfb time.Duration
	rps       float64
	cpu       time.Duration // per request
	redisRTs  float64       // Redis read events per request, when counted
}

// compare starts a sim replica, plain Caddy reverse_proxy in front of it
// and llm_router in front of it (through the openai engine, so both proxy
// to the same replica), and measures all three, interleaved.
func compare(args []string) error {
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	bin := fs.String("llmgw", "./llmgw", "the llmgw binary (its reverse_proxy is plain Caddy's)")
	dur := fs.Duration("d", 5*time.Second, "duration of each measurement")
	rounds := fs.Int("rounds", 3, "interleaved rounds; medians are reported")
	conc := fs.String("c", "1,64", "concurrencies")
	tokens := fs.Int("max-tokens", 20, "tokens per answer (stream chunks)")
	withRedis := fs.Bool("redis", true, "also measure llm_quota with a redis-server it starts (needs redis-server on PATH)")
	withGuard := fs.Bool("guard", true, "also measure llm_guardrails (pii and regex on input and output)")
	rate := fs.Float64("rate", 0, "also measure every scenario paced to this many requests per second in all, the same work for every target (0: closed loop only)")
	sizes := fs.String("prompt-bytes", "0", "prompt sizes to measure, such as 1024,10240,102400 (0: a one-line prompt)")
	unique := fs.Bool("unique", false, "give every request a new question, and also measure the whole pipeline (llm_quota, llm_guardrails, llm_cache exact and semantic, llm_router) missing the cache")
	entries := fs.String("cache-entries", "10000,100000", "with -unique: questions the pipeline's cache holds before it is measured, one gateway per size")
	steady := fs.Bool("cache-steady", true, "with -unique: bound each cache to about -cache-entries questions, so that it is full once filled (false: room to grow to 2 GiB, which also measures the memory growing)")
	admission := fs.String("cache-admission", "frequency", "with -unique: llm_cache's admission: frequency (its default: a full cache keeps a new answer only for a question asked more often than the entry it would evict, so unique questions are not kept) or all (each answer kept evicts another)")
	apis := fs.String("apis", "", "also measure llm_router with the same questions in these APIs, translated to chat completions: responses,messages")
	_ = fs.Parse(args)
	dir, err := os.MkdirTemp("", "llmgw-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
			_ = p.Wait()
		}
	}()
	replica, cmd, err := startReplica(*bin)
	if err != nil {
		return err
	}
	procs = append(procs, cmd)
	targets := []target{{name: "direct", url: "http://" + replica + "/v1"}}
	llmApp := "llm {\n\t\tmodel bench {\n\t\t\tengine openai\n\t\t\toption base_url http://" + replica + "/v1\n\t\t}\n" + benchTenancy + "\t}"
	gateways := []gateway{
		{"caddy reverse_proxy", "reverse_proxy " + replica, "", "", 0},
		{"llmgw llm_router", "route /v1/* {\n\t\tllm_router\n\t}", llmApp, "", 0},
		{"+ llm_quota memory", "route /v1/* {\n\t\tllm_quota\n\t\tllm_router\n\t}", llmApp, "", 0},
		{"+ llm_quota memory, headers always", "route /v1/* {\n\t\tllm_quota {\n\t\t\trate_limit_headers always\n\t\t}\n\t\tllm_router\n\t}", llmApp, "", 0},
		{"llm_cache exact hits", "route /v1/* {\n\t\tllm_cache\n\t\tllm_router\n\t}", llmApp, "", 0},
	}
	if *withGuard {
		gateways = append(gateways, gateway{name: "+ llm_guardrails pii,regex",
			site: "route /v1/* {\n\t\tllm_guardrails {\n" + benchGuard + "\t\t}\n\t\tllm_router\n\t}", global: llmApp})
	}
	if *withRedis {
		url, cmd, err := startRedis(dir)
		if cmd != nil {
			procs = append(procs, cmd)
		}
		if err != nil {
			return err
		}
		gateways = append(gateways, gateway{name: "+ llm_quota redis",
			site: "route /v1/* {\n\t\tllm_quota {\n\t\t\tstore " + url + "\n\t\t}\n\t\tllm_router\n\t}", global: llmApp, redis: strings.TrimPrefix(url, "redis://")})
	}
	if *unique {
		gateways = append(gateways[:3], pipelineGateways(*entries, llmApp, *steady, *admission)...)
	}
	for _, g := range gateways {
		port, cmd, err := startGateway(*bin, dir, g.name, g.global, g.site)
		if cmd != nil {
			procs = append(procs, cmd)
		}
		if err != nil {
			return err
		}
		targets = append(targets, target{name: g.name, url: fmt.Sprintf("http://127.0.0.1:%d/v1", port), pids: []int{cmd.Process.Pid}, redis: g.redis})
		if g.name == "llmgw llm_router" && *apis != "" {
			router := targets[len(targets)-1]
			for _, a := range strings.Split(*apis, ",") {
				if a = strings.TrimSpace(a); a != "" {
					targets = append(targets, target{name: "llm_router, /v1/" + a, url: router.url, pids: router.pids, api: a})
				}
			}
		}
		if n := g.fill; n > 0 {
			fmt.Fprintf(os.Stderr, "filling the cache of %q with %d questions\n", g.name, n)
			fill := loadConfig{URL: targets[len(targets)-1].url, Model: "bench", Concurrency: 64, Requests: n, MaxTokens: 1, Key: benchKey, Unique: true}
			if res, err := run(fill); err != nil || res.Errors > 0 {
				return fmt.Errorf("filling %s: %v (%d errors)", g.name, err, res.Errors)
			}
		}
	}
	for _, c := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(c)
		if err != nil {
			return fmt.Errorf("-c: %w", err)
		}
		for _, size := range strings.Split(*sizes, ",") {
			pb, err := strconv.Atoi(size)
			if err != nil {
				return fmt.Errorf("-prompt-bytes: %w", err)
			}
			for _, stream := range []bool{false, true} {
				cfg := loadConfig{Model: "bench", Concurrency: n, Duration: *dur, Stream: stream, MaxTokens: *tokens, Key: benchKey, PromptBytes: pb, Unique: *unique}
				if err := scenario(cfg, targets, *rounds); err != nil {
					return err
				}
				if *rate > 0 {
					cfg.Rate = *rate
					if err := scenario(cfg, targets, *rounds); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func scenario(cfg loadConfig, targets []target, rounds int) error {
	samples, err := measure(cfg, targets, rounds)
	if err != nil {
		return err
	}
	return printCompare(cfg, targets, rounds, samples)
}

// measure warms every target up, then runs cfg against each target once
// per round, rotating the order, and returns each target's samples.
func measure(cfg loadConfig, targets []target, rounds int) ([][]sample, error) {
	samples := make([][]sample, len(targets))
	for i, t := range targets { // warm up pools
		c := cfg
		c.URL, c.Duration, c.API = t.url, time.Second, t.api
		if _, err := run(c); err != nil {
			return nil, fmt.Errorf("%s: %w", targets[i].name, err)
		}
	}
	for round := range rounds {
		// Each round starts at another target, so that no target always
		// follows the same one (the machine's state carries over).
		for k := range targets {
			i := (round + k) % len(targets)
			t := targets[i]
			c := cfg
			c.URL, c.API = t.url, t.api
			reads0, rerr := redisReads(t.redis)
			before := sumCPU(t.pids)
			res, err := run(c)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
			reads1, rerr1 := redisReads(t.redis)
			if res.Errors > 0 {
				return nil, fmt.Errorf("%s: %d errors, first: %s", t.name, res.Errors, res.FirstErr)
			}
			cpu := (sumCPU(t.pids) - before) / time.Duration(res.OK)
			smp := sample{p50: pct(res.Latency, .5), ttfb: pct(res.TTFB, .5), rps: res.rps(), cpu: cpu}
			if t.redis != "" && rerr == nil && rerr1 == nil {
				smp.redisRTs = float64(reads1-reads0) / float64(res.OK)
			}
			samples[i] = append(samples[i], smp)
		}
	}
	return samples, nil
}

// sumCPU is the CPU time pids have used, together.
func sumCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, d := range cpuTimes(pids) {
		sum += d
	}
	return sum
}

// printCompare prints compare's table for one scenario: every target
// against the direct one (first), plain Caddy (second) and llm_router
// (third).
func printCompare(cfg loadConfig, targets []target, rounds int, samples [][]sample) error {
	paced := ""
	if cfg.Rate > 0 {
		paced = fmt.Sprintf(", paced to %.0f req/s", cfg.Rate)
	}
	fmt.Printf("\nconcurrency %d%s, stream %t, prompt %d bytes, %d rounds of %s (medians)\n", cfg.Concurrency, paced, cfg.Stream, len(cfg.body()), rounds, cfg.Duration)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tp50\tadded p50\tttfb p50\tadded ttfb\treq/s\tvs direct\tcpu/req\tcpu vs caddy\tcpu vs router\t")
	direct := median(samples[0])
	caddy := median(samples[1])
	router := median(samples[2])
	ratio := func(t target, a, b time.Duration) string {
		if len(t.pids) == 0 || b <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", float64(a)/float64(b))
	}
	for i, t := range targets {
		m := median(samples[i])
		cpu := "-"
		if len(t.pids) > 0 {
			cpu = us(m.cpu)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.0f\t%.2f\t%s\t%s\t%s\t\n", t.name, us(m.p50), us(m.p50-direct.p50),
			us(m.ttfb), us(m.ttfb-direct.ttfb), m.rps, m.rps/direct.rps, cpu, ratio(t, m.cpu, caddy.cpu), ratio(t, m.cpu, router.cpu))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Round by round, each module's CPU per request over the router's
	// in the same round: the geometric mean and its 95% confidence
	// interval say how much of a difference is the machine's noise.
	for i, t := range targets {
		if i <= 2 || len(samples[i]) < 2 {
			continue
		}
		ratios := make([]float64, len(samples[i]))
		for r := range ratios {
			ratios[r] = float64(samples[i][r].cpu) / float64(samples[2][r].cpu)
		}
		mean, f := geoMeanCI(ratios)
		fmt.Printf("  %s cpu/req over llm_router's, round by round: %.3f (95%% CI %.3f–%.3f)\n", t.name, mean, mean/f, mean*f)
	}
	for i, t := range targets {
		if t.redis == "" {
			continue
		}
		var sum float64
		for _, smp := range samples[i] {
			sum += smp.redisRTs
		}
		fmt.Printf("  %s: %.2f round trips to Redis per request (read events Redis processed, mean of %d rounds)\n",
			t.name, sum/float64(len(samples[i])), len(samples[i]))
	}
	return nil
}

// redisReads returns how many read events a Redis has processed: each
// is one round trip from a client (a command or a pipeline of them).
func redisReads(addr string) (int64, error) {
	if addr == "" {
		return 0, nil
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("INFO stats\r\n")); err != nil {
		return 0, err
	}
	br := bufio.NewReader(c)
	if _, err := br.ReadString('\n'); err != nil { // $<length>
		return 0, err
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return 0, fmt.Errorf("redis INFO stats has no total_reads_processed: %w", err)
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_reads_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
}

func median(s []sample) sample {
	pick := func(f func(sample) float64) float64 {
		v := make([]float64, len(s))
		for i, x := range s {
			v[i] = f(x)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return sample{
		p50:  time.Duration(pick(func(x sample) float64 { return float64(x.p50) })),
		ttfb: time.Duration(pick(func(x sample) float64 { return float64(x.ttfb) })),
		rps:  pick(func(x sample) float64 { return x.rps }),
		cpu:  time.Duration(pick(func(x sample) float64 { return float64(x.cpu) })),
	}
}

func startReplica(bin string) (string, *exec.Cmd, error) {
	cmd := exec.Command(bin, "engine", "sim", "replica", "--listen", "127.0.0.1:0", "--model", "bench")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("starting the sim replica with %s: %w", bin, err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "LLMGW_REPLICA_ADDR "); ok {
			return strings.TrimSpace(a), cmd, nil
		}
	}
	return "", cmd, errors.New("the sim replica did not print its address")
}

func startGateway(bin, dir, name, global, site string) (int, *exec.Cmd, error) {
	return startGatewayAdmin(bin, dir, name, "off", global, site)
}

// startGatewayAdmin is startGateway with Caddy's admin endpoint at admin
// ("off" for none), and the global llm option global.
func startGatewayAdmin(bin, dir, name, admin, global, site string) (int, *exec.Cmd, error) {
	port, err := freeTCPPort()
	if err != nil {
		return 0, nil, err
	}
	sub := filepath.Join(dir, strconv.Itoa(port))
	if err := os.MkdirAll(sub, 0o700); err != nil {
		return 0, nil, err
	}
	cfg := fmt.Sprintf("{\n\tadmin %s\n\tauto_https off\n\tstorage file_system %s\n\t%s\n}\n\n:%d {\n\t%s\n}\n", admin, sub, global, port, site)
	file := filepath.Join(sub, "Caddyfile")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		return 0, nil, err
	}
	cmd := exec.Command(bin, "run", "--config", file)
	cmd.Env = append(os.Environ(), "HOME="+sub, "XDG_DATA_HOME="+sub, "XDG_CONFIG_HOME="+sub)
	logs, err := os.Create(filepath.Join(sub, "log"))
	if err != nil {
		return 0, nil, err
	}
	defer logs.Close() // the child has its own copy
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", port)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"model":"bench","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Authorization", "Bearer "+benchKey)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return port, cmd, nil
			}
		}
	}
	return 0, cmd, fmt.Errorf("%s did not start", name)
}

// benchKey is the key the quota targets admit, with limits no run reaches.
const benchKey = "sk-llmgw-bench"

// benchTenancy declares benchKey (the hash of "sk-llmgw-bench").
const benchTenancy = `		org bench {
			requests_per_minute 1000000000
			team bench {
				tokens_per_minute 1000000000000
				project bench {
					key bench 2bacfa82483273e42adf3fba026e2f1bce1ca984bff259eca96a7fa4a757fb2a
				}
			}
		}
`

func startRedis(dir string) (string, *exec.Cmd, error) {
	port, err := freeTCPPort()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("starting redis-server (or run with -redis=false): %w", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitListen(addr); err != nil {
		return "", cmd, fmt.Errorf("redis-server: %w", err)
	}
	return "redis://" + addr, cmd, nil
}
