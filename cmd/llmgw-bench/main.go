// Command llmgw-bench is a closed-loop load generator for OpenAI-compatible
// endpoints. It drives a URL at a fixed concurrency and reports latency
// percentiles, requests per second and, for streams, time to first and
// last byte. With -pid it also reports the CPU time those processes spent
// per request. "llmgw-bench compare" runs the sim replica directly, behind
// plain Caddy reverse_proxy and behind llm_router, all in one run, and
// prints the gateway overhead side by side. "llmgw-bench ollama" does the
// same for tokens per second and time to first token on a real Ollama
// serving the tiny test model. "llmgw-bench mirror" compares the weights
// mirror's upload and fetch with raw minio-go on one large file.
// "llmgw-bench cluster" runs Redis and llmgw nodes on loopback and
// measures the node-to-node hop against a plain Caddy hop, and how fast
// admin changes made on one node show on another. "llmgw-bench scale"
// starts a real Redis and clusters of real llmgw nodes of growing size,
// and reports how fast placement converges from a cold start and the
// Redis commands per second per node at idle. "llmgw-bench providers"
// simulates a day of traffic to a model served by several providers under
// each routing policy, against an oracle that knew the future.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "ollama" {
		if err := ollamaCompare(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "llmgw-bench ollama:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "mirror" {
		if err := mirrorCompare(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "llmgw-bench mirror:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "cluster" {
		if err := clusterBench(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "llmgw-bench cluster:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "cluster-add" {
		if err := clusterAddBench(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "llmgw-bench cluster-add:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "scale" {
		if err := scale(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "llmgw-bench scale:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "mcp-serve" {
		if err := mcpServe(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "llmgw-bench mcp-serve:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "mcp" {
		if err := mcpCompare(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "llmgw-bench mcp:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "prefix" {
		if err := prefixBench(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "llmgw-bench prefix:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "providers" {
		if err := providersBench(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "llmgw-bench providers:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "compare" {
		if err := compare(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "llmgw-bench compare:", err)
			os.Exit(1)
		}
		return
	}
	var cfg loadConfig
	var pids pidList
	fs := flag.NewFlagSet("llmgw-bench", flag.ExitOnError)
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080/v1", "base URL of the OpenAI-compatible API")
	fs.StringVar(&cfg.Model, "model", "sim-chat", "model to ask for")
	fs.IntVar(&cfg.Concurrency, "c", 1, "concurrent clients")
	fs.DurationVar(&cfg.Duration, "d", 10*time.Second, "how long to run")
	fs.IntVar(&cfg.Requests, "n", 0, "stop after this many requests (0: run for -d)")
	fs.BoolVar(&cfg.Stream, "stream", false, "ask for streamed answers")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", 20, "max_tokens of each request")
	fs.StringVar(&cfg.Key, "key", "", "API key to send as a bearer token")
	fs.Float64Var(&cfg.Rate, "rate", 0, "pace the clients to this many requests per second in all (0: each sends its next request when its last one is answered)")
	fs.IntVar(&cfg.PromptBytes, "prompt-bytes", 0, "make the prompt this long (prose with an email and a card number per kilobyte)")
	fs.BoolVar(&cfg.Unique, "unique", false, "give every request a question never asked before")
	uniqueFrom := fs.Int64("unique-from", 0, "with -unique: number the questions from this one on, past those an earlier run asked")
	fs.StringVar(&cfg.API, "api", "", "the API to ask in: chat (default), responses or messages")
	fs.Var(&pids, "pid", "a process whose CPU time per request to report (repeatable)")
	_ = fs.Parse(os.Args[1:])
	uniqueSeq.Store(*uniqueFrom)
	if cfg.API == "chat" {
		cfg.API = ""
	}
	cpu0 := cpuTimes(pids)
	res, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "llmgw-bench:", err)
		os.Exit(1)
	}
	res.print(os.Stdout, cfg)
	for i, pid := range pids {
		used := cpuTimes(pids)[i] - cpu0[i]
		fmt.Printf("cpu pid %d: %.1f µs/request\n", pid, float64(used.Microseconds())/float64(max(res.OK, 1)))
	}
	if res.Errors > 0 {
		os.Exit(1)
	}
}
