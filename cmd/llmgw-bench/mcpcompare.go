package main

import (
	"context"
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
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpCompare is "llmgw-bench mcp": the latency and CPU of an MCP tool call
// made directly to an upstream MCP server (mcp-serve over Streamable
// HTTP) and through llmgw's llm_mcp in front of it (alone, and behind
// llm_quota with a key), at each concurrency, in interleaved rounds.
func mcpCompare(args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ExitOnError)
	bin := fs.String("llmgw", "./llmgw", "the llmgw binary")
	dur := fs.Duration("d", 5*time.Second, "duration of each measurement")
	rounds := fs.Int("rounds", 3, "interleaved rounds; medians are reported")
	conc := fs.String("c", "1,64", "concurrencies (one client session per concurrent caller)")
	_ = fs.Parse(args)
	dir, err := os.MkdirTemp("", "llmgw-bench-mcp-")
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
	self, err := os.Executable()
	if err != nil {
		return err
	}
	port, err := freeTCPPort()
	if err != nil {
		return err
	}
	up := exec.Command(self, "mcp-serve", "-listen", fmt.Sprintf("127.0.0.1:%d", port), "-name", "up")
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		return err
	}
	procs = append(procs, up)
	upURL := fmt.Sprintf("http://127.0.0.1:%d/", port)
	if err := waitTCP(port); err != nil {
		return err
	}
	mcpSite := "route /mcp* {\n\t\t%s\n\t\tllm_mcp {\n\t\t\tserver up {\n\t\t\t\turl " + upURL + "\n\t\t\t}\n\t\t}\n\t}"
	targets := []mcpTarget{{name: "direct", url: upURL, tool: "echo", pids: []int{up.Process.Pid}}}
	for _, gw := range []struct{ name, before, global string }{
		{"llmgw llm_mcp", "", ""},
		{"+ llm_quota (key, tools globs)", "llm_quota", "llm {\n" + benchTenancy + "\t}"},
	} {
		p, cmd, err := startMCPGateway(*bin, dir, gw.global, fmt.Sprintf(mcpSite, gw.before))
		if cmd != nil {
			procs = append(procs, cmd)
		}
		if err != nil {
			return err
		}
		targets = append(targets, mcpTarget{name: gw.name, url: fmt.Sprintf("http://127.0.0.1:%d/mcp", p), tool: "up.echo",
			key: benchKey, pids: []int{cmd.Process.Pid}, upPid: up.Process.Pid})
	}
	for _, cs := range strings.Split(*conc, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(cs))
		if err != nil || c < 1 {
			return fmt.Errorf("-c %q: give concurrencies such as 1,64", *conc)
		}
		if err := mcpScenario(targets, c, *dur, *rounds); err != nil {
			return err
		}
	}
	return nil
}

type mcpTarget struct {
	name, url, tool, key string
	pids                 []int // whose CPU is counted per call
	upPid                int
}

type mcpSample struct {
	p50, p99 time.Duration
	rps      float64
	cpu      time.Duration // of pids, per call
}

func mcpScenario(targets []mcpTarget, c int, dur time.Duration, rounds int) error {
	samples := make([][]mcpSample, len(targets))
	for range rounds {
		for i, t := range targets {
			s, err := mcpMeasure(t, c, dur)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			samples[i] = append(samples[i], s)
		}
	}
	fmt.Printf("\nMCP tools/call (echo, Streamable HTTP), concurrency %d, %d rounds of %s (medians)\n", c, rounds, dur)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tp50\tp99\tcalls/s\tadded p50\tadded p99\tCPU/call (gateway or server)\t")
	var base mcpSample
	for i, t := range targets {
		m := mcpMedian(samples[i])
		if i == 0 {
			base = m
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t\n", t.name, m.p50.Round(time.Microsecond), m.p99.Round(time.Microsecond), m.rps,
			(m.p50 - base.p50).Round(time.Microsecond), (m.p99 - base.p99).Round(time.Microsecond), m.cpu.Round(time.Microsecond))
	}
	return tw.Flush()
}

func mcpMedian(s []mcpSample) mcpSample {
	pick := func(f func(mcpSample) float64) float64 {
		v := make([]float64, len(s))
		for i := range s {
			v[i] = f(s[i])
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return mcpSample{p50: time.Duration(pick(func(x mcpSample) float64 { return float64(x.p50) })),
		p99: time.Duration(pick(func(x mcpSample) float64 { return float64(x.p99) })),
		rps: pick(func(x mcpSample) float64 { return x.rps }),
		cpu: time.Duration(pick(func(x mcpSample) float64 { return float64(x.cpu) }))}
}

// mcpMeasure opens c sessions, warms them, and has each call the tool in
// a closed loop for dur.
func mcpMeasure(t mcpTarget, c int, dur time.Duration) (mcpSample, error) {
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c * 2}}
	if t.key != "" {
		hc.Transport = bearerTransport{key: t.key, base: hc.Transport}
	}
	sessions := make([]*mcp.ClientSession, c)
	for i := range sessions {
		cl := mcp.NewClient(&mcp.Implementation{Name: "llmgw-bench", Version: "1"}, nil)
		s, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: t.url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			return mcpSample{}, err
		}
		defer s.Close()
		sessions[i] = s
	}
	args := map[string]any{"text": "hello from llmgw-bench"}
	call := func(s *mcp.ClientSession) error {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: t.tool, Arguments: args})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %v", res.Content)
		}
		return err
	}
	for _, s := range sessions {
		if err := call(s); err != nil {
			return mcpSample{}, err
		}
	}
	lat := make([][]time.Duration, c)
	var wg sync.WaitGroup
	errs := make(chan error, c)
	cpu0 := sumCPU(t.pids)
	start := time.Now()
	deadline := start.Add(dur)
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if err := call(s); err != nil {
					errs <- err
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := sumCPU(t.pids) - cpu0
	select {
	case err := <-errs:
		return mcpSample{}, err
	default:
	}
	all := slices.Concat(lat...)
	n := len(all)
	if n == 0 {
		return mcpSample{}, fmt.Errorf("no call finished")
	}
	return mcpSample{p50: pct(all, .5), p99: pct(all, .99), rps: float64(n) / elapsed.Seconds(), cpu: cpu / time.Duration(n)}, nil
}

type bearerTransport struct {
	key  string
	base http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

func waitTCP(port int) error {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return nil
		}
	}
	return fmt.Errorf("nothing listens on port %d", port)
}

// startMCPGateway runs llmgw with site (a route to llm_mcp) and waits until
// it lists the upstream's tools.
func startMCPGateway(bin, dir, global, site string) (int, *exec.Cmd, error) {
	port, err := freeTCPPort()
	if err != nil {
		return 0, nil, err
	}
	sub := filepath.Join(dir, strconv.Itoa(port))
	if err := os.MkdirAll(sub, 0o700); err != nil {
		return 0, nil, err
	}
	cfg := fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n\tstorage file_system %s\n\t%s\n}\n\n:%d {\n\t%s\n}\n", sub, global, port, site)
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
	defer logs.Close()
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	hc := &http.Client{Transport: bearerTransport{key: benchKey, base: http.DefaultTransport}}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cl := mcp.NewClient(&mcp.Implementation{Name: "llmgw-bench", Version: "1"}, nil)
		s, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			continue
		}
		res, err := s.ListTools(context.Background(), nil)
		s.Close()
		if err == nil && len(res.Tools) > 0 {
			return port, cmd, nil
		}
	}
	return 0, cmd, fmt.Errorf("llmgw with llm_mcp did not start or list tools; see %s", filepath.Join(sub, "log"))
}
