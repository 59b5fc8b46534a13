package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// redisCounters reads INFO's total_reads_processed (round trips from
// clients) and commandstats' MGET calls (one per node heartbeat).
func (r *redisServer) counters() (reads, mgets int64) {
	r.t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.port))
	if err != nil {
		r.t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("INFO everything\r\n")); err != nil {
		r.t.Fatal(err)
	}
	br := bufio.NewReader(c)
	head, err := br.ReadString('\n')
	if err != nil {
		r.t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		r.t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_reads_processed:"); ok {
			reads, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "cmdstat_mget:calls="); ok {
			v, _, _ = strings.Cut(v, ",")
			mgets, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return reads, mgets
}

// An idle cluster whose shared state no administrator ever changed costs
// Redis two round trips per node heartbeat: the pipeline and the MGET of
// the nodes' heartbeats, nothing more.
func TestClusterIdleRoundTripsPerHeartbeat(t *testing.T) {
	c := startCluster(t, 2, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")))
	n1 := c.nodes["n1"]
	waitFor(t, 30*time.Second, "three replicas of chat", func() bool { return len(n1.readyOn("chat")) == 3 })
	time.Sleep(time.Second) // the plan settles
	reads0, mgets0 := c.redis.counters()
	time.Sleep(3 * time.Second)
	reads1, mgets1 := c.redis.counters()
	beats := mgets1 - mgets0
	if beats < 4 {
		t.Fatalf("%d heartbeats in 3s from two nodes beating every 250ms", beats)
	}
	// Besides the heartbeats: this test's INFO and the subscriptions'
	// health checks (one PING per node every 5s).
	perBeat := float64(reads1-reads0-1-2) / float64(beats)
	t.Logf("%d heartbeats, %.2f round trips to Redis each", beats, perBeat)
	if perBeat > 2.2 {
		t.Errorf("an idle heartbeat costs %.2f round trips to Redis; want 2 (one pipeline, one MGET)", perBeat)
	}
}
