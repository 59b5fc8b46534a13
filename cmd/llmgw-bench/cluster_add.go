package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// clusterAddBench measures how long a model added through one node's
// admin API takes to be served through every node: Redis and three llmgw
// nodes on loopback with the default heartbeat, one model added and
// removed per round, on the leader and on another node in turn. Right
// after the 201 a request for the model goes through every node at once
// (each waits, bounded, for a replica); the times are until each answers.
func clusterAddBench(args []string) error {
	fs := flag.NewFlagSet("cluster-add", flag.ExitOnError)
	bin := fs.String("llmgw", "./llmgw", "the llmgw binary")
	rounds := fs.Int("n", 40, "models added (half on the leader, half on another node)")
	heartbeat := fs.Duration("heartbeat", time.Second, "the nodes' heartbeat")
	ttl := fs.Duration("node-ttl", 5*time.Second, "the nodes' node_ttl")
	keep := fs.Bool("keep", false, "keep the nodes' directories (their Caddyfile and log) and say where")
	_ = fs.Parse(args)
	dir, err := os.MkdirTemp("", "llmgw-bench-cluster-add-")
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
	var nodes []*clusterNode
	for i, name := range []string{"A", "B", "C"} {
		n, cmd, err := startAddNode(*bin, dir, name, fmt.Sprintf("127.0.0.%d", i+2), redisURL, *heartbeat, *ttl)
		if cmd != nil {
			procs = append(procs, cmd)
		}
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	if err := waitUntil(30*time.Second, "three nodes and a leader", func() bool { return leaderOf(nodes[0]) != "" && nodeCount(nodes[0]) == 3 }); err != nil {
		return err
	}
	return addRounds(os.Stdout, nodes, *rounds)
}

// startAddNode starts one node of the bench cluster; its one model,
// bench, is how the start is seen to be complete.
func startAddNode(bin, dir, name, ip, redisURL string, heartbeat, ttl time.Duration) (*clusterNode, *exec.Cmd, error) {
	peer, err := freeTCPPort()
	if err != nil {
		return nil, nil, err
	}
	admin, err := freeTCPPort()
	if err != nil {
		return nil, nil, err
	}
	global := fmt.Sprintf("llm {\n\t\tcluster {\n\t\t\tredis %s\n\t\t\tnode %s\n\t\t\tadvertise %s:%d\n\t\t\tsecret %s\n"+
		"\t\t\theartbeat %s\n\t\t\tnode_ttl %s\n\t\t}\n\t\tmodel bench {\n\t\t\tengine sim\n\t\t\tmin 1\n\t\t\tmax 1\n\t\t}\n%s\t}",
		redisURL, name, ip, peer, benchClusterSecret, heartbeat, ttl, benchTenancy)
	n := &clusterNode{name: name, admin: fmt.Sprintf("127.0.0.1:%d", admin)}
	fmt.Fprintf(os.Stderr, "starting node %s (node-to-node on %s:%d)\n", name, ip, peer)
	n.port, n.cmd, err = startGatewayAdmin(bin, dir, "node "+name, n.admin, global, "route /v1/* {\n\t\tllm_quota\n\t\tllm_router\n\t}")
	return n, n.cmd, err
}

type nodesView struct {
	Leader string `json:"leader"`
	Nodes  []struct {
		Name string `json:"name"`
	} `json:"nodes"`
}

func nodesOf(n *clusterNode) nodesView {
	var v nodesView
	if code, b, err := adminDo(n, "GET", "/llm/nodes", ""); err == nil && code == 200 {
		_ = json.Unmarshal(b, &v)
	}
	return v
}

func leaderOf(n *clusterNode) string { return nodesOf(n).Leader }
func nodeCount(n *clusterNode) int   { return len(nodesOf(n).Nodes) }

// addRounds adds and removes n models, each on the leader and on another
// node in turn, and prints, for each, the time from the 201 until every
// node served it and from the first node's answer (its replica ready)
// until the last's.
func addRounds(w io.Writer, nodes []*clusterNode, n int) error {
	all := map[bool][]time.Duration{}
	notFound := 0 // answers 404: a node did not know the model after its 201
	spread := map[bool][]time.Duration{}
	for i := range n {
		onLeader := i%2 == 0
		leader := leaderOf(nodes[0])
		var via *clusterNode
		for _, nd := range nodes {
			if (nd.name == leader) == onLeader {
				via = nd
				break
			}
		}
		name := fmt.Sprintf("added-%d", i)
		code, body, err := adminDo(via, "POST", "/llm/models", `{"name":"`+name+`","engine":"sim","scaling":{"min":1,"max":1}}`)
		if err != nil || code != 201 {
			return fmt.Errorf("adding %s on %s: %d %s %v", name, via.name, code, body, err)
		}
		took, missing, err := servedEverywhere(nodes, name)
		if err != nil {
			return err
		}
		notFound += missing
		first, last := took[0], took[0]
		for _, d := range took {
			first, last = min(first, d), max(last, d)
		}
		all[onLeader] = append(all[onLeader], last)
		spread[onLeader] = append(spread[onLeader], last-first)
		if code, body, err := adminDo(via, "DELETE", "/llm/models/"+name, ""); err != nil || code >= 300 {
			return fmt.Errorf("removing %s: %d %s %v", name, code, body, err)
		}
	}
	for _, onLeader := range []bool{true, false} {
		where := "added on another node"
		if onLeader {
			where = "added on the leader"
		}
		a, s := all[onLeader], spread[onLeader]
		fmt.Fprintf(w, "%s (%d): served through every node after the 201 p50 %s p99 %s max %s; first node's answer to last's p50 %s p99 %s max %s\n",
			where, len(a), ms(pct(a, .5)), ms(pct(a, .99)), ms(slicesMax(a)), ms(pct(s, .5)), ms(pct(s, .99)), ms(slicesMax(s)))
	}
	fmt.Fprintf(w, "requests answered 404 (a node did not know the model after its 201): %d\n", notFound)
	return nil
}

func slicesMax(d []time.Duration) time.Duration {
	var m time.Duration
	for _, x := range d {
		m = max(m, x)
	}
	return m
}

// servedEverywhere sends one request for model through every node at
// once and returns how long each took to answer 200, and how many answers
// were 404.
func servedEverywhere(nodes []*clusterNode, model string) ([]time.Duration, int, error) {
	var notFound atomic.Int64
	took := make([]time.Duration, len(nodes))
	errs := make([]error, len(nodes))
	start := time.Now()
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < 30*time.Second {
				code, body, err := askModel(nd, model)
				if err == nil && code == 200 {
					took[i] = time.Since(start)
					return
				}
				if code == http.StatusNotFound {
					notFound.Add(1)
				}
				errs[i] = fmt.Errorf("node %s: %d %s %v", nd.name, code, body, err)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for i := range nodes {
		if took[i] == 0 {
			return nil, 0, fmt.Errorf("%s was not served within 30s: %v", model, errs[i])
		}
	}
	return took, int(notFound.Load()), nil
}

func askModel(n *clusterNode, model string) (int, []byte, error) {
	req, err := http.NewRequest("POST", n.url()+"/chat/completions",
		strings.NewReader(`{"model":"`+model+`","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+benchKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := adminClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
