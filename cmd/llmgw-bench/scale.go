package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

// scaleSecret is the bench cluster's credential.
const scaleSecret = "llmgw-bench-scale-secret-0123456789abcdef"

// scaleConfig is one scale run's settings.
type scaleConfig struct {
	bin, redis, replica string
	dir                 string
	rpn, min            int // replicas per node (the catalog grows with the cluster), replicas per model
	nodeMemory          string
	nodeCores           int
	modelMemory         string
	modelCores          int
	heartbeat, ttl      time.Duration
	idle, settle        time.Duration
	timeout             time.Duration
	requests            int
}

// scaleNode is one llmgw node of the bench cluster.
type scaleNode struct {
	name               string
	ip                 string
	http, admin, peer  int
	dir                string
	cmd                *exec.Cmd
	exited             chan struct{}
	startedAt, readyAt time.Time
	logFile            *os.File
	waitErr            error
	closeOnce          sync.Once
}

// procs are the processes scale started, stopped on every way out
// (return, error, SIGINT, SIGTERM).
type procs struct {
	once   sync.Once
	mu     sync.Mutex
	closed bool // everything is being stopped: nothing new joins
	nodes  []*scaleNode
	other  []*exec.Cmd
}

func (p *procs) addOther(c *exec.Cmd) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed { // started while everything stops
		_ = c.Process.Kill()
		_ = c.Wait()
		return
	}
	p.other = append(p.other, c)
}

// addNode counts a started node in, or stops it at once when everything
// is being stopped.
func (p *procs) addNode(sn *scaleNode) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = syscall.Kill(-sn.cmd.Process.Pid, syscall.SIGKILL)
		return errors.New("interrupted")
	}
	p.nodes = append(p.nodes, sn)
	return nil
}

// stopNodes stops the llmgw nodes (each is the leader of its process
// group: it and its engine plugin), gracefully, then by force.
func (p *procs) stopNodes() {
	p.mu.Lock()
	nodes := p.nodes
	p.nodes = nil
	p.mu.Unlock()
	for _, n := range nodes {
		if n.cmd.Process != nil {
			_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, n := range nodes {
		select {
		case <-n.exited:
		case <-time.After(time.Until(deadline)):
		}
	}
	for _, n := range nodes {
		// The group may outlive its leader (an engine plugin still
		// stopping): kill what is left of it.
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		n.closeOnce.Do(func() { _ = n.logFile.Close() })
	}
}

// stopAll stops every process; a second caller (the interrupt and the
// return racing) waits until the first is done, so that the program
// cannot exit halfway.
func (p *procs) stopAll() { p.once.Do(p.stopEverything) }

func (p *procs) stopEverything() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.stopNodes()
	p.mu.Lock()
	other := p.other
	p.other = nil
	p.mu.Unlock()
	for _, c := range other {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
	}
}

// scale starts a real Redis, one sim server and clusters of real llmgw
// nodes of growing size, and measures how fast placement converges from
// a cold start and how many Redis commands each node costs at idle.
func scale(args []string) error {
	fs := flag.NewFlagSet("scale", flag.ExitOnError)
	var cfg scaleConfig
	bin := fs.String("llmgw", "./llmgw", "the llmgw binary")
	sizes := fs.String("nodes", "5,10,20,50", "cluster sizes to measure, one cold start each")
	fs.IntVar(&cfg.rpn, "replicas-per-node", 10, "replicas in the catalog per node: the catalog grows with the cluster (50 nodes: 500 replicas)")
	fs.IntVar(&cfg.min, "min", 5, "min (and max) replicas of each model")
	fs.StringVar(&cfg.nodeMemory, "node-memory", "64GiB", "memory each node declares")
	fs.IntVar(&cfg.nodeCores, "node-cores", 16, "cores each node declares")
	fs.StringVar(&cfg.modelMemory, "model-memory", "5GiB", "memory each replica needs")
	fs.IntVar(&cfg.modelCores, "model-cores", 1, "cores each replica needs")
	fs.DurationVar(&cfg.heartbeat, "heartbeat", time.Second, "the cluster's heartbeat")
	fs.DurationVar(&cfg.ttl, "node-ttl", 5*time.Second, "the cluster's node TTL")
	fs.DurationVar(&cfg.idle, "idle", 10*time.Second, "how long Redis is watched at idle, after convergence")
	fs.DurationVar(&cfg.settle, "settle", 3*time.Second, "wait after convergence before the idle window")
	fs.DurationVar(&cfg.timeout, "timeout", 120*time.Second, "give up on a cluster size that has not converged after this")
	fs.IntVar(&cfg.requests, "requests", 3, "chat requests through each of 3 nodes' front ends, to random models")
	keep := fs.Bool("keep", false, "keep the work directory (nodes' configs and logs)")
	_ = fs.Parse(args)
	cfg.bin = *bin
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 250 {
			return fmt.Errorf("-nodes %q: give cluster sizes from 1 to 250, such as 5,10,20,50", *sizes)
		}
		ns = append(ns, n)
	}
	if cfg.min < 1 || cfg.rpn < 1 {
		return errors.New("-min and -replicas-per-node must be at least 1")
	}
	dir, err := os.MkdirTemp("", "llmgw-bench-scale-")
	if err != nil {
		return err
	}
	cfg.dir = dir
	if *keep {
		fmt.Fprintln(os.Stderr, "work directory (kept):", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	p := &procs{}
	defer p.stopAll()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			fmt.Fprintln(os.Stderr, "llmgw-bench scale: interrupted; stopping every process it started")
			p.stopAll()
			if !*keep {
				os.RemoveAll(dir)
			}
			os.Exit(130)
		}
	}()

	redisURL, rcmd, err := startRedis(dir)
	if rcmd != nil {
		p.addOther(rcmd)
	}
	if err != nil {
		return err
	}
	cfg.redis = redisURL
	replica, scmd, err := startReplica(cfg.bin)
	if scmd != nil {
		p.addOther(scmd)
	}
	if err != nil {
		return err
	}
	cfg.replica = replica

	perNode, err := slotsPerNode(cfg)
	if err != nil {
		return err
	}
	fmt.Printf("llmgw-bench scale: %d replicas per node in the catalog, min=max %d per model; each node declares memory %s, cores %d; "+
		"each replica needs memory %s, cores %d (room for %d per node); heartbeat %s, node_ttl %s\n",
		cfg.rpn, cfg.min, cfg.nodeMemory, cfg.nodeCores, cfg.modelMemory, cfg.modelCores, perNode, cfg.heartbeat, cfg.ttl)
	fmt.Println("replicas: outside-provider engine (openai) pointed at one sim server; sim engines would each be a process")
	var rows []scaleRow
	for _, n := range ns {
		row, err := scaleRun(cfg, p, n, perNode)
		p.stopNodes()
		if err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
		rows = append(rows, row)
		if err := redisDo(strings.TrimPrefix(cfg.redis, "redis://"), "FLUSHALL"); err != nil {
			return fmt.Errorf("emptying Redis between runs: %w", err)
		}
	}
	printScale(rows, cfg)
	return nil
}

// slotsPerNode is how many replicas fit a node by its declared capacity.
func slotsPerNode(cfg scaleConfig) (int, error) {
	nm, err := parseSize(cfg.nodeMemory)
	if err != nil {
		return 0, fmt.Errorf("-node-memory: %w", err)
	}
	mm, err := parseSize(cfg.modelMemory)
	if err != nil {
		return 0, fmt.Errorf("-model-memory: %w", err)
	}
	n := int(nm / max(mm, 1))
	if cfg.modelCores > 0 {
		n = min(n, cfg.nodeCores/cfg.modelCores)
	}
	return n, nil
}

// parseSize reads sizes such as 64GiB, 512MiB or 1024.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"B", 1}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n * u.mult, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// scaleRow is what one cluster size measured.
type scaleRow struct {
	nodes, models, replicas int
	startAll                time.Duration // first node started → every node answers
	converge                time.Duration // every node answers → every model at its min, ready
	cold                    time.Duration // first node started → converged
	settled                 time.Duration // every node answers → the plan a fixed point, all of it ready
	cmdsPerSec              float64
	readsPerSec             float64
	netInPerSec             float64 // bytes Redis received per second
	netOutPerSec            float64 // bytes Redis sent per second
	redisCPU                float64 // Redis CPU seconds per second
	nodeCPU                 float64 // a node's CPU seconds per second (llmgw process, mean)
	beatBytes               float64 // a node's heartbeat in Redis, mean
	coldCmds, coldBytes     float64 // Redis commands and bytes sent from the first start until the plan settled
	planWrites              float64 // PUBLISHes meanwhile: plans written (and nodes or state announced)
	idleMoved               bool    // the plan changed during the idle window
	byCmd                   map[string]float64
	maxOnNode               int
	fullNodes               int // nodes with no room for one more replica
	spread                  int // models whose replicas are all on different nodes
	requestsOK, requests    int
	remote                  int // of those, served by a replica on another node
}

func scaleRun(cfg scaleConfig, p *procs, n, perNode int) (scaleRow, error) {
	row := scaleRow{nodes: n}
	row.models = max(1, n*cfg.rpn/cfg.min)
	row.replicas = row.models * cfg.min
	catalog := scaleCatalog(cfg, row.models)
	nodes := make([]*scaleNode, n)
	for i := range nodes {
		sn, err := newScaleNode(cfg, i, catalog)
		if err != nil {
			return row, err
		}
		nodes[i] = sn
	}
	fmt.Fprintf(os.Stderr, "%d nodes, %d models, %d replicas: starting the nodes\n", n, row.models, row.replicas)
	addr := strings.TrimPrefix(cfg.redis, "redis://")
	start, err := redisInfo(addr)
	if err != nil {
		return row, err
	}
	t0 := time.Now()
	for _, sn := range nodes {
		if err := sn.start(cfg.bin); err != nil {
			return row, err
		}
		if err := p.addNode(sn); err != nil {
			return row, err
		}
	}
	// Every node's front end answers.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, sn := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = sn.waitAnswers(cfg.timeout)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return row, err
	}
	tAll := time.Now()
	row.startAll = tAll.Sub(t0)
	fmt.Fprintf(os.Stderr, "  every node answers after %s; waiting for every model's %d replicas to be ready\n", row.startAll.Round(time.Millisecond), cfg.min)
	// Every model at its min, ready, as the first node reports.
	first := nodes[0]
	var last string
	for {
		ms, err := first.models()
		if err == nil {
			done, msg := converged(ms, cfg.min, row.models)
			if done {
				break
			}
			last = msg
		} else {
			last = err.Error()
		}
		if time.Since(tAll) > cfg.timeout {
			return row, fmt.Errorf("placement did not converge within %s: %s (node logs: %s)", cfg.timeout, last, cfg.dir)
		}
		for _, sn := range nodes {
			select {
			case <-sn.exited:
				return row, fmt.Errorf("node %s exited: %v; its log: %s", sn.name, sn.waitErr, tail(filepath.Join(sn.dir, "log"), 20))
			default:
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	tConv := time.Now()
	row.converge, row.cold = tConv.Sub(tAll), tConv.Sub(t0)
	fmt.Fprintf(os.Stderr, "  converged %s after every node answered (%s after the first node started)\n",
		row.converge.Round(time.Millisecond), row.cold.Round(time.Millisecond))

	// The plan settles: the leader moves one replica of a model a round
	// to spread it onto nodes that joined late, until it is a fixed
	// point and every entry is ready where it says.
	st, err := waitSettled(first, 3*cfg.heartbeat, tConv.Add(cfg.timeout))
	if err != nil {
		return row, err
	}
	row.settled = time.Since(tAll) - 3*cfg.heartbeat
	if end, err := redisInfo(addr); err == nil {
		row.coldCmds = end.num("total_commands_processed") - start.num("total_commands_processed")
		row.coldBytes = end.num("total_net_output_bytes") - start.num("total_net_output_bytes")
		row.planWrites = end.num("cmdstat_publish") - start.num("cmdstat_publish")
	}
	fmt.Fprintf(os.Stderr, "  plan settled (a fixed point, every entry ready) %s after every node answered\n", row.settled.Round(time.Millisecond))
	// Where the replicas went, as the first node's GET /llm/nodes says.
	if len(st.Nodes) != n {
		return row, fmt.Errorf("GET /llm/nodes on %s lists %d nodes; want %d", first.name, len(st.Nodes), n)
	}
	for _, nd := range st.Nodes {
		ready := 0
		for _, r := range nd.Replicas {
			if r.State == "ready" {
				ready++
			}
		}
		row.maxOnNode = max(row.maxOnNode, ready)
		if ready >= perNode {
			row.fullNodes++
		}
	}
	row.spread = spreadOf(st)

	// Requests through three nodes' front ends, to random models.
	for _, sn := range pick(nodes, 3) {
		for range cfg.requests {
			model := fmt.Sprintf("m%03d", 1+rand.IntN(row.models))
			row.requests++
			code, rep, body := sn.chat(model)
			if code != 200 {
				fmt.Fprintf(os.Stderr, "  request to %s through %s: %d %s\n", model, sn.name, code, strings.TrimSpace(body))
				continue
			}
			row.requestsOK++
			if !replicaOn(st, rep, sn.name) {
				row.remote++
			}
		}
	}

	// Idle: no requests; Redis's counters over the window.
	time.Sleep(cfg.settle)
	before, err := redisInfo(addr)
	if err != nil {
		return row, err
	}
	pids := make([]int, n)
	for i, sn := range nodes {
		pids[i] = sn.cmd.Process.Pid
	}
	cpu0 := cpuTimes(pids)
	t1 := time.Now()
	time.Sleep(cfg.idle)
	after, err := redisInfo(addr)
	if err != nil {
		return row, err
	}
	cpu1 := cpuTimes(pids)
	secs := time.Since(t1).Seconds()
	var used time.Duration
	for i := range pids {
		used += cpu1[i] - cpu0[i]
	}
	row.nodeCPU = used.Seconds() / secs / float64(n)
	var beats float64
	for _, sn := range nodes {
		l, err := redisCall(addr, "STRLEN llmgw:scale:node:"+sn.name)
		if err != nil {
			return row, err
		}
		b, _ := strconv.ParseFloat(l, 64)
		beats += b
	}
	row.beatBytes = beats / float64(n)
	// Idle means the plan did not change meanwhile.
	end, err := first.nodesStatus()
	if err != nil {
		return row, err
	}
	b0, _ := json.Marshal(st.Plan)
	b1, _ := json.Marshal(end.Plan)
	row.idleMoved = string(b0) != string(b1)
	if row.idleMoved {
		fmt.Fprintf(os.Stderr, "  the plan changed during the idle window: spread %d/%d before it, %d/%d after\n",
			row.spread, row.models, spreadOf(end), row.models)
	}
	rate := func(k string) float64 { return (after.num(k) - before.num(k)) / secs }
	// The two INFO commands are this bench's own.
	row.cmdsPerSec = rate("total_commands_processed") - 1/secs
	row.readsPerSec = rate("total_reads_processed") - 1/secs
	row.netInPerSec = rate("total_net_input_bytes")
	row.netOutPerSec = rate("total_net_output_bytes")
	row.redisCPU = rate("used_cpu_sys") + rate("used_cpu_user")
	row.byCmd = map[string]float64{}
	for k := range after {
		if c, ok := strings.CutPrefix(k, "cmdstat_"); ok {
			if d := rate(k); d > 0 && c != "info" {
				row.byCmd[c] = d
			}
		}
	}
	fmt.Fprintf(os.Stderr, "  idle: %.1f Redis commands/s, %.2f per node\n", row.cmdsPerSec, row.cmdsPerSec/float64(n))
	return row, nil
}

// scaleCatalog is the llm block's models, the same on every node: each
// an outside-provider replica pointed at the one sim server, with
// declared resources.
func scaleCatalog(cfg scaleConfig, models int) string {
	var b strings.Builder
	for i := 1; i <= models; i++ {
		fmt.Fprintf(&b, "\t\tmodel m%03d {\n\t\t\tengine openai\n\t\t\toption base_url http://%s/v1\n\t\t\toption model bench\n"+
			"\t\t\tmin %d\n\t\t\tmax %d\n\t\t\tresources {\n\t\t\t\tmemory %s\n\t\t\t\tcores %d\n\t\t\t}\n\t\t}\n",
			i, cfg.replica, cfg.min, cfg.min, cfg.modelMemory, cfg.modelCores)
	}
	b.WriteString(benchTenancy)
	return b.String()
}

// portPool hands out ports that are free now, each once, below the
// kernel's ephemeral range: a port picked by binding port 0 can be picked
// again by the next such bind (150 picks among 28,000 ports collide more
// often than not), or taken meanwhile as the source port of an outgoing
// connection, and two nodes on one port (Caddy listens with SO_REUSEPORT)
// share its connections instead of failing.
type portPool struct {
	mu     sync.Mutex
	cursor int
	used   map[int]bool
}

var ports = &portPool{used: map[int]bool{}}

func (pp *portPool) next() (int, error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.cursor == 0 {
		pp.cursor = 20000 + rand.IntN(4000)
	}
	for ; pp.cursor < 32768; pp.cursor++ {
		p := pp.cursor
		if pp.used[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
		if err != nil {
			continue
		}
		l.Close()
		pp.used[p] = true
		pp.cursor++
		return p, nil
	}
	return 0, errors.New("no free port left between 20000 and 32767")
}

func newScaleNode(cfg scaleConfig, i int, catalog string) (*scaleNode, error) {
	sn := &scaleNode{name: fmt.Sprintf("n%02d", i+1), ip: fmt.Sprintf("127.0.0.%d", i+2), exited: make(chan struct{})}
	var err error
	for _, port := range []*int{&sn.http, &sn.admin, &sn.peer} {
		if *port, err = ports.next(); err != nil {
			return nil, err
		}
	}
	sn.dir = filepath.Join(cfg.dir, fmt.Sprintf("%d-%s", time.Now().UnixNano(), sn.name))
	if err := os.MkdirAll(sn.dir, 0o700); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	auto_https off
	storage file_system %s
	llm {
		node {
			memory %s
			cores %d
		}
		cluster {
			redis %s
			name scale
			node %s
			advertise %s:%d
			secret %s
			heartbeat %s
			node_ttl %s
		}
%s	}
}

:%d {
	header {
		defer
		X-Llm-Replica {http.llm.replica}
	}
	route /v1/* {
		llm_router
	}
}
`, sn.admin, filepath.Join(sn.dir, "storage"), cfg.nodeMemory, cfg.nodeCores, cfg.redis, sn.name, sn.ip, sn.peer,
		scaleSecret, cfg.heartbeat, cfg.ttl, catalog, sn.http)
	return sn, os.WriteFile(filepath.Join(sn.dir, "Caddyfile"), []byte(conf), 0o600)
}

// start runs the node in a process group of its own, so that it and its
// engine plugin are stopped together.
func (sn *scaleNode) start(bin string) error {
	f, err := os.Create(filepath.Join(sn.dir, "log"))
	if err != nil {
		return err
	}
	sn.logFile = f
	sn.cmd = exec.Command(bin, "run", "--config", filepath.Join(sn.dir, "Caddyfile"))
	sn.cmd.Env = append(os.Environ(), "HOME="+sn.dir, "XDG_DATA_HOME="+filepath.Join(sn.dir, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(sn.dir, "config"))
	sn.cmd.Stdout, sn.cmd.Stderr = f, f
	sn.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sn.startedAt = time.Now()
	if err := sn.cmd.Start(); err != nil {
		return fmt.Errorf("starting node %s with %s: %w", sn.name, bin, err)
	}
	go func() { sn.waitErr = sn.cmd.Wait(); close(sn.exited) }()
	return nil
}

func (sn *scaleNode) waitAnswers(limit time.Duration) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/models", sn.http)
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-sn.exited:
			return fmt.Errorf("node %s exited at start (%v): %s", sn.name, sn.waitErr, tail(filepath.Join(sn.dir, "log"), 20))
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 || resp.StatusCode == 401 {
				sn.readyAt = time.Now()
				return nil
			}
		}
	}
	return fmt.Errorf("node %s did not answer within %s: %s", sn.name, limit, tail(filepath.Join(sn.dir, "log"), 20))
}

// scaleModel and scaleNodes are the parts of GET /llm/models and GET
// /llm/nodes the bench reads.
type scaleModel struct {
	Name     string `json:"name"`
	Min      int    `json:"min"`
	Replicas []struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Node  string `json:"node"`
	} `json:"replicas"`
}

type scaleNodes struct {
	Leader string `json:"leader"`
	Nodes  []struct {
		Name     string `json:"name"`
		Replicas []struct {
			ID    string `json:"id"`
			Model string `json:"model"`
			State string `json:"state"`
		} `json:"replicas"`
	} `json:"nodes"`
	Plan     map[string][]string `json:"plan"`
	Unplaced map[string]string   `json:"unplaced"`
}

func (sn *scaleNode) adminGet(path string, v any) error {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", sn.admin, path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s on %s: %d %s", path, sn.name, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

func (sn *scaleNode) models() ([]scaleModel, error) {
	var ms []scaleModel
	return ms, sn.adminGet("/llm/models", &ms)
}

func (sn *scaleNode) nodesStatus() (scaleNodes, error) {
	var st scaleNodes
	return st, sn.adminGet("/llm/nodes", &st)
}

// waitSettled waits until the plan, as node sn sees it, has not changed
// for quiet and every node runs ready exactly the replicas the plan gives
// it. It returns the last GET /llm/nodes.
func waitSettled(sn *scaleNode, quiet time.Duration, deadline time.Time) (scaleNodes, error) {
	var last string
	var since time.Time
	for {
		st, err := sn.nodesStatus()
		if err != nil {
			return st, err
		}
		b, _ := json.Marshal(st.Plan)
		if string(b) != last {
			last, since = string(b), time.Now()
		}
		if planRunning(st) && time.Since(since) >= quiet {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("the plan did not settle (a fixed point, every entry ready); unplaced: %v", st.Unplaced)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// planRunning says whether every node runs ready exactly the replicas
// the plan gives it, and nothing else.
func planRunning(st scaleNodes) bool {
	want := map[string]int{} // model@node → replicas
	for model, on := range st.Plan {
		for _, n := range on {
			want[model+"@"+n]++
		}
	}
	have := map[string]int{}
	for _, nd := range st.Nodes {
		for _, r := range nd.Replicas {
			if r.State != "ready" {
				return false
			}
			have[r.Model+"@"+nd.Name]++
		}
	}
	return maps.Equal(want, have)
}

// converged says whether every one of want models has min ready
// replicas, and if not, how far it is.
func converged(ms []scaleModel, min, want int) (bool, string) {
	short, ready := 0, 0
	for _, m := range ms {
		n := 0
		for _, r := range m.Replicas {
			if r.State == "ready" {
				n++
			}
		}
		ready += n
		if n < min {
			short++
		}
	}
	if len(ms) < want {
		return false, fmt.Sprintf("%d of %d models known", len(ms), want)
	}
	return short == 0, fmt.Sprintf("%d replicas ready, %d models short of %d", ready, short, min)
}

func (sn *scaleNode) chat(model string) (int, string, string) {
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", sn.http),
		strings.NewReader(`{"model":"`+model+`","max_tokens":3,"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Authorization", "Bearer "+benchKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Llm-Replica"), string(b)
}

// replicaOn says whether replica id runs on node.
func replicaOn(st scaleNodes, id, node string) bool {
	for _, nd := range st.Nodes {
		for _, r := range nd.Replicas {
			if r.ID == id {
				return nd.Name == node
			}
		}
	}
	return false
}

// spreadOf counts the models whose replicas the plan puts on different
// nodes.
func spreadOf(st scaleNodes) int {
	n := 0
	for _, on := range st.Plan {
		if len(on) == len(uniq(on)) {
			n++
		}
	}
	return n
}

func pick(nodes []*scaleNode, k int) []*scaleNode {
	s := slices.Clone(nodes)
	rand.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s[:min(k, len(s))]
}

func uniq(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return slices.Compact(c)
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-lines):], "\n")
}

// redisStats is INFO's fields; commandstats' calls are under
// cmdstat_<command>.
type redisStats map[string]string

func (s redisStats) num(k string) float64 {
	f, _ := strconv.ParseFloat(s[k], 64)
	return f
}

// redisInfo reads INFO stats, cpu and commandstats.
func redisInfo(addr string) (redisStats, error) {
	body, err := redisCall(addr, "INFO everything")
	if err != nil {
		return nil, err
	}
	st := redisStats{}
	for _, line := range strings.Split(body, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if c, ok := strings.CutPrefix(k, "cmdstat_"); ok { // calls=12,usec=…
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			st["cmdstat_"+c] = calls
			continue
		}
		st[k] = v
	}
	return st, nil
}

func redisDo(addr, cmd string) error {
	_, err := redisCall(addr, cmd)
	return err
}

// redisCall sends one inline command and returns its reply (a bulk
// string's content, or a status line).
func redisCall(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	head, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	switch head[0] {
	case '-':
		return "", fmt.Errorf("redis %s: %s", cmd, strings.TrimSpace(head[1:]))
	case '$':
		n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
		if err != nil || n < 0 {
			return "", fmt.Errorf("redis %s: unexpected reply %q", cmd, head)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(br, b); err != nil {
			return "", err
		}
		return string(b[:n]), nil
	}
	return strings.TrimSpace(head[1:]), nil
}

func printScale(rows []scaleRow, cfg scaleConfig) {
	fmt.Printf("\ncold start (all nodes started at once), then idle (%s window, no requests)\n", cfg.idle)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tmodels\treplicas\tall answer\tconverge\tcold total\tsettled\tmax/node\tfull\tspread\tcmds/s\tcmds/s/node\trtt/s/node\tin KB/s/node\tout KB/s/node\tbeat KB\tredis cpu\tnode cpu\tplan idle\trequests\t")
	for _, r := range rows {
		n := float64(r.nodes)
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d/%d\t%.1f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t%.0f%%\t%.1f%%\t%s\t%d/%d (%d remote)\t\n",
			r.nodes, r.models, r.replicas, secs(r.startAll), secs(r.converge), secs(r.cold), secs(r.settled), r.maxOnNode, r.fullNodes, r.spread, r.models,
			r.cmdsPerSec, r.cmdsPerSec/n, r.readsPerSec/n, r.netInPerSec/n/1024, r.netOutPerSec/n/1024, r.beatBytes/1024, 100*r.redisCPU, 100*r.nodeCPU, map[bool]string{false: "steady", true: "MOVED"}[r.idleMoved],
			r.requestsOK, r.requests, r.remote)
	}
	_ = tw.Flush()
	fmt.Println("\nconverge: from every node answering until every model has its min ready as GET /llm/models on the first node reports;")
	fmt.Println("cold total: from the first node's start. settled: from every node answering until the plan is a fixed point")
	fmt.Println("(spread onto the nodes that joined late) and every node runs ready what it gives it. max/node: most ready replicas on one node (GET /llm/nodes);")
	fmt.Println("full: nodes with no room for one more replica. spread: models whose replicas are all on different nodes. rtt/s/node: round trips (Redis read events).")
	fmt.Println("in/out KB/s/node: bytes Redis received/sent, per node. beat KB: a node's heartbeat as stored (every node reads all of them")
	fmt.Println("every heartbeat). redis cpu: of one core. node cpu: one llmgw process's, of one core, mean over the nodes.")
	fmt.Println("\nduring the cold start (from the first node's start until the plan settled):")
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tredis commands\tper node\tMB sent\tper node\tpublishes (plan writes)\t")
	for _, r := range rows {
		n := float64(r.nodes)
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.1f\t%.2f\t%.0f\t\n", r.nodes, r.coldCmds, r.coldCmds/n, r.coldBytes/1e6, r.coldBytes/1e6/n, r.planWrites)
	}
	_ = tw.Flush()
	fmt.Println("\nidle Redis commands per second per node, by command:")
	var cmds []string
	for _, r := range rows {
		for c := range r.byCmd {
			if !slices.Contains(cmds, c) {
				cmds = append(cmds, c)
			}
		}
	}
	sort.Strings(cmds)
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "nodes\t")
	for _, c := range cmds {
		fmt.Fprintf(tw, "%s\t", c)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t", r.nodes)
		for _, c := range cmds {
			fmt.Fprintf(tw, "%.2f\t", r.byCmd[c]/float64(r.nodes))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
