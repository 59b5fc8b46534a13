package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReadmeThreeNodes runs the manual's three nodes on one machine
// (docs/cluster.md) as written, with the test's Redis, ports and
// directory put in: the nodes form one cluster, every front end serves the model, and llmgw ctl and
// llmgw reload reach a node at its admin address.
func TestReadmeThreeNodes(t *testing.T) {
	readme, err := os.ReadFile("../../docs/cluster.md")
	if err != nil {
		t.Fatal(err)
	}
	const first = "# cluster.Caddyfile: the same file for every node\n"
	_, rest, ok := strings.Cut(string(readme), first)
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/cluster.md has no three-node example starting with " + first)
	}
	r := startRedis(t)
	dir := t.TempDir()
	example = strings.Replace(example, "redis://127.0.0.1:6379/0", r.url()+"/0", 1)
	file := filepath.Join(dir, "cluster.Caddyfile")
	if err := os.WriteFile(file, []byte(first+example), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string][]string{}
	front := map[string]int{}
	for _, n := range []string{"n1", "n2", "n3"} {
		front[n] = freePort(t)
		env[n] = append(os.Environ(), "NODE="+n, fmt.Sprint("ADMIN_PORT=", freePort(t)), fmt.Sprint("PEER_PORT=", freePort(t)),
			fmt.Sprint("HTTP_PORT=", front[n]), "XDG_DATA_HOME="+filepath.Join(dir, "data", n),
			"LLMGW_CLUSTER_SECRET="+clusterSecret, "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config", n))
		logs := &syncBuffer{}
		cmd := exec.Command(binary, "run", "--config", file)
		cmd.Env, cmd.Stdout, cmd.Stderr = env[n], logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("node %s:\n%s", n, tail(logs.String(), 3000))
			}
		})
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		waitFor(t, 90*time.Second, "node "+n+" to serve chat", func() bool {
			code, node := chatThrough(front[n])
			return code == 200 && node != ""
		})
	}
	ctl := func(n string, args ...string) string {
		cmd := exec.Command(binary, append([]string{"ctl"}, args...)...)
		cmd.Env = env[n]
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("llmgw ctl %s as %s: %v\n%s", strings.Join(args, " "), n, err, out)
		}
		return string(out)
	}
	admin := strings.TrimPrefix(envOf(env["n2"], "ADMIN_PORT"), "ADMIN_PORT=")
	env["n2 by LLMGW_ADMIN"] = append(slices.Clone(env["n2"]), "LLMGW_ADMIN=127.0.0.1:"+admin)
	// Each node may serve chat with its own replica before it has seen
	// the others' heartbeats: wait until n2 knows all three.
	waitFor(t, 30*time.Second, "n2 to see the three nodes", func() bool {
		out := ctl("n2", "--admin", "127.0.0.1:"+admin, "nodes")
		return strings.Contains(out, "n1") && strings.Contains(out, "n3")
	})
	for _, out := range []string{ctl("n2", "--admin", "127.0.0.1:"+admin, "nodes"), ctl("n2", "--config", file, "nodes"),
		ctl("n2 by LLMGW_ADMIN", "nodes")} {
		if !strings.Contains(out, "n1") || !strings.Contains(out, "n3") {
			t.Errorf("llmgw ctl nodes on n2 does not list the three nodes:\n%s", out)
		}
	}
	reload := exec.Command(binary, "reload", "--config", file)
	reload.Env = env["n2"]
	if out, err := reload.CombinedOutput(); err != nil {
		t.Errorf("llmgw reload --config on n2: %v\n%s", err, out)
	}
}

func envOf(env []string, name string) string {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return e
		}
	}
	return ""
}

// chatThrough asks the front end on port for chat, as docs/cluster.md's curl
// does, and returns the status and the node its answer names.
func chatThrough(port int) (int, string) {
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", port), "application/json",
		strings.NewReader(`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return -1, ""
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Llmgw-Node")
}
