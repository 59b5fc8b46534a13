package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// TestClusterWrongSecret starts a node whose cluster secret is not the
// cluster's: it must not join (it was listed, given replicas no node could
// reach and could mint keys), and it must say why at start.
func TestClusterWrongSecret(t *testing.T) {
	c := startCluster(t, 2, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")))
	n1 := c.nodes["n1"]
	waitFor(t, 30*time.Second, "two nodes", func() bool { return len(n1.nodes().Nodes) == 2 })

	c.secret = map[string]string{"w": "a-different-secret-0123456789abcdef012345"}
	w := c.node("w")
	w.base = fmt.Sprintf("http://127.0.0.1:%d", w.http)
	w.exited = make(chan struct{})
	w.cmd = llmgwCmd(w)
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.exited) }()
	t.Cleanup(w.stop)
	select {
	case <-w.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("a node with another cluster secret still runs after 60s:\n%s", tail(w.logs.String(), 4000))
	}
	logs := w.logs.String()
	if !strings.Contains(logs, "cluster secret differs from the other nodes'") || !strings.Contains(logs, `"level":"error"`) {
		t.Fatalf("the refused node's logs do not say why at error level:\n%s", tail(logs, 4000))
	}
	// Without llm_router's expose_replica an answer names no replica.
	if rep, node, err := servedBy(n1); err != nil || rep != "" || node != "" {
		t.Errorf("an answer without expose_replica: replica %q node %q (%v); want neither header", rep, node, err)
	}
	// It was never a member.
	for range 8 {
		for _, nd := range n1.nodes().Nodes {
			if nd.Name == "w" {
				t.Fatalf("n1 lists the node with another secret: %+v", nd)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// llmgwCmd is the command that runs g's config, as start runs it.
func llmgwCmd(g *gateway) *exec.Cmd {
	cmd := exec.Command(binary, "run", "--config", filepath.Join(g.dir, "Caddyfile"))
	cmd.Env = append(os.Environ(), "HOME="+g.dir, "XDG_DATA_HOME="+filepath.Join(g.dir, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(g.dir, "config"))
	cmd.Stdout, cmd.Stderr = g.logs, g.logs
	return cmd
}
