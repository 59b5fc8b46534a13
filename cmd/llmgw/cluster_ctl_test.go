package main

import (
	"bufio"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// ctl cluster stop drains the nodes one at a time, the leader last: while
// a node is still serving, every request is answered (replicas start on
// the serving nodes before they stop on the drained one). Once stopped,
// no replica runs anywhere, status says so, and model requests get a
// clear refusal; ctl cluster start brings every model back.
func TestClusterStopStart(t *testing.T) {
	c := startCluster(t, 3, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")))
	n1 := c.nodes["n1"]
	for _, g := range c.nodes {
		waitFor(t, 30*time.Second, "three replicas of chat on three nodes", func() bool {
			return slices.Equal(g.readyOn("chat"), []string{"n1", "n2", "n3"})
		})
	}
	leader := n1.nodes().Leader
	// A change refused in a cluster answers with its reason (it once
	// closed the connection instead).
	if out, err := ctlRun(t, n1, "node", "drain", "nosuch"); err == nil || !strings.Contains(out, `no node "nosuch" in the cluster`) {
		t.Fatalf("ctl node drain of an unknown node: %v\n%s", err, out)
	}
	out, err := ctlRun(t, n1, "cluster", "status")
	if err != nil || !regexpLine(out, "n1", "v", "serving", "1") || !strings.Contains(out, "leader "+leader) {
		t.Fatalf("ctl cluster status: %v\n%s", err, out)
	}

	l := steadyLoad(t, func() []*gateway { return []*gateway{c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]} }, "secret-1", "chat", 16)
	cmd := exec.Command(binary, "ctl", "--admin", fmt.Sprintf("127.0.0.1:%d", n1.admin), "cluster", "stop")
	stdout, _ := cmd.StdoutPipe()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var order []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutSuffix(strings.TrimPrefix(line, "node "), " drained"); ok {
			order = append(order, name)
			if len(order) == 2 {
				// The last node is drained next: its replicas have
				// nowhere to go, so the requests are checked up to here.
				ok, failed := l.end()
				if len(failed) > 0 || ok == 0 {
					t.Errorf("%d requests answered, and these failed while nodes were drained one by one: %v", ok, failed)
				}
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ctl cluster stop: %v\n%s", err, stderr.String())
	}
	if len(order) != 3 || order[2] != leader {
		t.Fatalf("ctl cluster stop drained %v; the leader %s should be last", order, leader)
	}
	for _, g := range c.nodes {
		// Every node's view, which is one heartbeat behind at most.
		waitFor(t, 5*time.Second, "no replica left after ctl cluster stop", func() bool { return replicasOnAll(g.nodes()) == 0 })
	}
	out, err = ctlRun(t, n1, "cluster", "status")
	if err != nil || strings.Count(out, "stopped") != 3 {
		t.Fatalf("ctl cluster status after stop: %v\n%s", err, out)
	}
	if code, _, body := ask(t, c.nodes["n2"], "secret-1", "chat"); code != 503 || !strings.Contains(body, "draining") {
		t.Errorf("a request to a stopped cluster: %d %s", code, body)
	}

	if out, err = ctlRun(t, n1, "cluster", "start"); err != nil || !strings.Contains(out, "cluster started") {
		t.Fatalf("ctl cluster start: %v\n%s", err, out)
	}
	for _, g := range c.nodes {
		if code, _, body := ask(t, g, "secret-1", "chat"); code != 200 {
			t.Fatalf("a request after ctl cluster start: %d %s", code, body)
		}
	}
	if out, err = ctlRun(t, n1, "cluster", "status"); err != nil || strings.Count(out, "serving") != 3 {
		t.Fatalf("ctl cluster status after start: %v\n%s", err, out)
	}
}

func replicasOnAll(st llmapi.NodesStatus) int {
	n := 0
	for _, nd := range st.Nodes {
		n += len(nd.Replicas)
	}
	return n
}
