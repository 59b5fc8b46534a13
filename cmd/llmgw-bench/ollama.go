package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/engines/ollama"
	"github.com/llmgw/llmgw/plugins/engine"
	"github.com/llmgw/llmgw/plugins/enginetest"
	"github.com/llmgw/llmgw/plugins/enginetest/tinygguf"
)

// ollamaCompare runs the tiny test model on a real Ollama and measures
// tokens per second and time to first token directly, through plain
// Caddy reverse_proxy and through llm_router (reaching the same Ollama
// through the openai engine), interleaved, at each concurrency.
func ollamaCompare(args []string) error {
	fs := flag.NewFlagSet("ollama", flag.ExitOnError)
	bin := fs.String("llmgw", "./llmgw", "the llmgw binary")
	ollamaBin := fs.String("ollama", enginetest.OllamaBin(), "the ollama binary (default: the one .ci/install builds, or on PATH)")
	per := fs.Int("n", 6, "answers per client in each measurement (a fixed count, so that batches of answers finishing together do not skew the rate)")
	rounds := fs.Int("rounds", 3, "interleaved rounds; medians are reported")
	conc := fs.String("c", "1,8", "concurrencies")
	tokens := fs.Int("max-tokens", 128, "tokens per answer (the tiny model always writes this many)")
	cores := fs.Int("cores", 0, "threads Ollama computes with (the model's cores; 0: every core). On a small machine, leaving a core to the client and the gateway keeps their work from stalling Ollama's compute threads, which wait for one another at every step")
	pin := fs.Bool("pin", false, "pin Ollama to the highest-numbered -cores cores, as a node with pin_cores does")
	_ = fs.Parse(args)
	if *ollamaBin == "" {
		return errors.New(enginetest.OllamaMissing)
	}
	dir, err := os.MkdirTemp("", "llmgw-bench-ollama-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	model := filepath.Join(dir, "tiny.gguf")
	if err := tinygguf.WriteFile(model, tinygguf.Default()); err != nil {
		return err
	}
	os.Setenv("LLMGW_ENGINE_BIN", *ollamaBin)
	eng := ollama.New(hclog.NewNullLogger())
	defer eng.Shutdown()
	var cpus []int
	if *pin {
		all, err := engine.CPUsOf(0)
		if err != nil {
			return err
		}
		if *cores == 0 || len(all) < *cores {
			return fmt.Errorf("-pin needs -cores between 1 and the %d cores this process may use", len(all))
		}
		cpus = all[len(all)-*cores:] // the highest, as the node gives them
	}
	rep, err := eng.Start(context.Background(), engine.ReplicaSpec{Model: "bench", ReplicaID: "bench-1", Source: model,
		ContextLength: 2048, Concurrency: 8, Cores: *cores, CPUs: cpus})
	if err != nil {
		return err
	}
	llmApp := "llm {\n\t\tmodel bench {\n\t\t\tengine openai\n\t\t\toption base_url " + rep.BaseURL + "\n\t\t\ttarget_concurrency 64\n\t\t}\n\t}"
	port, cmd, err := startGateway(*bin, dir, "llmgw", llmApp, "route /v1/* {\n\t\tllm_router\n\t}")
	if cmd != nil {
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	}
	if err != nil {
		return err
	}
	// Plain Caddy reverse_proxy (the same binary, no llmgw module in the
	// path) in front of the same Ollama: the cost of any proxy hop on
	// this machine, against which llmgw's own cost shows.
	u, _ := url.Parse(rep.BaseURL)
	caddyPort, caddyCmd, err := startGateway(*bin, dir, "caddy reverse_proxy", "",
		"reverse_proxy "+u.Host+" {\n\t\tflush_interval -1\n\t}")
	if caddyCmd != nil {
		defer func() { _ = caddyCmd.Process.Kill(); _ = caddyCmd.Wait() }()
	}
	if err != nil {
		return err
	}
	targets := []target{{name: "ollama direct", url: rep.BaseURL},
		{name: "caddy reverse_proxy", url: fmt.Sprintf("http://127.0.0.1:%d/v1", caddyPort), pids: []int{caddyCmd.Process.Pid}},
		{name: "through llmgw", url: fmt.Sprintf("http://127.0.0.1:%d/v1", port), pids: []int{cmd.Process.Pid}}}
	for _, c := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(c)
		if err != nil {
			return fmt.Errorf("-c: %w", err)
		}
		cfg := loadConfig{Model: "bench", Concurrency: n, Requests: n * *per, Stream: true, MaxTokens: *tokens}
		samples := make([][]sample, len(targets))
		for i, t := range targets { // warm up: one answer per client
			w := cfg
			w.URL, w.Requests = t.url, n
			if _, err := run(w); err != nil {
				return fmt.Errorf("%s: %w", targets[i].name, err)
			}
		}
		for r := range *rounds {
			// Each round starts one target further on, so that no target
			// always follows the same one (Ollama's caches warm either way).
			for j := range targets {
				i := (r + j) % len(targets)
				t := targets[i]
				w := cfg
				w.URL = t.url
				res, err := run(w)
				if err != nil {
					return err
				}
				if res.Errors > 0 {
					return fmt.Errorf("%s: %d errors, first: %s", t.name, res.Errors, res.FirstErr)
				}
				samples[i] = append(samples[i], sample{p50: pct(res.Latency, .5), ttfb: pct(res.TTFB, .5), rps: res.rps()})
				if os.Getenv("LLMGW_BENCH_VERBOSE") != "" {
					res.print(os.Stdout, w)
				}
			}
		}
		threads := "every core"
		if *cores > 0 {
			threads = fmt.Sprintf("%d threads", *cores)
		}
		if len(cpus) > 0 {
			threads += fmt.Sprintf(", pinned to cores %v", cpus)
		}
		fmt.Printf("\ntiny model on Ollama (%s), concurrency %d, streamed, %d tokens per answer, %d rounds of %d answers (medians)\n", threads, n, *tokens, *rounds, n**per)
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "target\ttokens/s\tvs direct\tttft p50\tadded ttft\tp50\t")
		direct := median(samples[0])
		for i, t := range targets {
			m := median(samples[i])
			fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%s\t%s\t%s\t\n", t.name, m.rps*float64(*tokens), m.rps/direct.rps, us(m.ttfb), us(m.ttfb-direct.ttfb), us(m.p50))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		// Each round's ratios: their spread is the noise any single figure
		// above carries. Their geometric mean, with a 95% confidence
		// interval, is the figure to quote: many short interleaved rounds
		// cancel the machine's drift.
		for _, p := range [][2]int{{2, 0}, {1, 0}, {2, 1}} {
			ratios := make([]float64, len(samples[0]))
			for r := range ratios {
				ratios[r] = samples[p[0]][r].rps / samples[p[1]][r].rps
			}
			mean, f := geoMeanCI(ratios)
			sort.Float64s(ratios)
			fmt.Printf("tokens/s %s over %s, round by round: geometric mean %.3f (95%% CI %.3f–%.3f), median %.3f, range %.3f–%.3f\n",
				targets[p[0]].name, targets[p[1]].name, mean, mean/f, mean*f, ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
		}
	}
	return nil
}
