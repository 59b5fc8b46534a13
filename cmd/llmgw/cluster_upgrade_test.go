package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// TestClusterUpgrade: three nodes run llmgw v0.0.1, each from its own
// binary, and trust an operator's release key (release_key). A release
// signed by another key is refused by the first node it reaches: ctl
// cluster upgrade stops there, naming the node, and every node is still
// on v0.0.1, undrained. The signed v0.0.2 then goes node by node (drain,
// install, restart, undrain, the leader last) under steady load through
// the nodes that are up, as a load balancer sends it: no request fails,
// every node ends on v0.0.2 with its old binary kept as .previous, and
// ctl nodes shows the versions.
func TestClusterUpgrade(t *testing.T) {
	dir := t.TempDir()
	v1 := stampedBinary(t, filepath.Join(dir, "v1"), "v0.0.1")
	v2 := stampedBinary(t, filepath.Join(dir, "v2"), "v0.0.2")
	sk, pub := testKey(t, dir, "ops")
	other, otherPub := testKey(t, dir, "other")
	v2bytes, _ := os.ReadFile(v2)
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, d := range []string{"good", "bad"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	good := releaseDir(t, filepath.Join(dir, "good"), "v0.0.2", platform, v2bytes, sk)
	bad := releaseDir(t, filepath.Join(dir, "bad"), "v0.0.2", platform, v2bytes, other)

	c := &cluster{t: t, redis: startRedis(t), models: fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")),
		nodes: map[string]*gateway{}, peer: map[string]string{},
		timing: "heartbeat 250ms\n\t\t\tnode_ttl 2s\n\t\t\trelease_key " + sk.Public().String()}
	bins := map[string]string{}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("n%d", i)
		g := c.node(name)
		bins[name] = filepath.Join(dir, name, "llmgw")
		os.MkdirAll(filepath.Dir(bins[name]), 0o755)
		copyExec(t, v1, bins[name])
		g.bin = bins[name]
		g.start()
		c.nodes[name] = g
	}
	n1 := c.nodes["n1"]
	for _, g := range c.nodes {
		waitFor(t, 30*time.Second, "three replicas of chat on three nodes", func() bool {
			return slices.Equal(g.readyOn("chat"), []string{"n1", "n2", "n3"})
		})
	}

	out, err := ctlRun(t, n1, "cluster", "upgrade", bad, "--key", otherPub)
	if err == nil || !strings.Contains(out, "refused") || !strings.Contains(out, "release_key in its cluster block") ||
		!strings.Contains(out, "upgraded before it: none") {
		t.Fatalf("ctl cluster upgrade with a release the nodes do not trust: %v\n%s", err, out)
	}
	for name, g := range c.nodes {
		waitFor(t, 10*time.Second, "every node on v0.0.1 and undrained", func() bool {
			for _, n := range g.nodes().Nodes {
				if n.Version != "v0.0.1" || n.Drained {
					return false
				}
			}
			return true
		})
		if sameFile(t, bins[name], v2) {
			t.Fatalf("node %s's binary was replaced by a refused release", name)
		}
	}

	upgradeUnderLoad(t, c, good, pub)
	for name, g := range c.nodes {
		if v := g.version(); v.Version != "v0.0.2" {
			t.Errorf("node %s runs %+v after the upgrade", name, v)
		}
		if !sameFile(t, bins[name], v2) || !sameFile(t, bins[name]+".previous", v1) {
			t.Errorf("node %s: want its binary v0.0.2 and its .previous v0.0.1", name)
		}
	}
	out, err = ctlRun(t, n1, "nodes")
	if err != nil || strings.Count(out, "v0.0.2") != 3 || strings.Contains(out, "different llmgw releases") {
		t.Errorf("ctl nodes after the upgrade: %v\n%s", err, out)
	}
}

// upgradeUnderLoad runs ctl cluster upgrade with the release tgz while
// 16 clients send requests through the nodes that are up: a node is taken
// out when ctl says it installs the release on it, and back once it
// answers again after its restart.
func upgradeUnderLoad(t *testing.T, c *cluster, tgz, pub string) {
	var mu sync.Mutex
	down := map[string]bool{}
	through := func() []*gateway {
		mu.Lock()
		defer mu.Unlock()
		var gs []*gateway
		for _, n := range c.names() {
			if !down[n] {
				gs = append(gs, c.nodes[n])
			}
		}
		return gs
	}
	l := steadyLoad(t, through, "secret-1", "chat", 16)
	cmd := exec.Command(binary, "ctl", "--admin", fmt.Sprintf("127.0.0.1:%d", c.nodes["n1"].admin), "cluster", "upgrade", tgz, "--key", pub)
	stdout, _ := cmd.StdoutPipe()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		var name string
		switch {
		case strings.HasSuffix(line, ": installing v0.0.2"):
			fmt.Sscanf(line, "node %s", &name)
			name = strings.TrimSuffix(name, ":")
			mu.Lock()
			down[name] = true
			mu.Unlock()
		case strings.HasSuffix(line, ": on v0.0.2, undrained"):
			fmt.Sscanf(line, "node %s", &name)
			name = strings.TrimSuffix(name, ":")
			g := c.nodes[name]
			waitFor(t, 30*time.Second, "node "+name+" answering again", func() bool {
				code, _, _ := ask(t, g, "secret-1", "chat")
				return code == 200
			})
			http.DefaultTransport.(*http.Transport).CloseIdleConnections()
			mu.Lock()
			down[name] = false
			mu.Unlock()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ctl cluster upgrade: %v\n%s\n%s", err, strings.Join(lines, "\n"), stderr.String())
	}
	ok, failed := l.end()
	t.Logf("%d requests answered during the upgrade:\n%s", ok, strings.Join(lines, "\n"))
	if len(failed) > 0 || ok == 0 {
		t.Errorf("requests failed during the cluster upgrade: %v", failed)
	}
	if last := lines[len(lines)-1]; last != "cluster upgraded to v0.0.2" {
		t.Errorf("ctl cluster upgrade ended with %q", last)
	}
}
