package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"syscall"
	"testing"
)

// prefixConv is a conversation of the prefix-affinity tests.
type prefixConv struct {
	msgs []map[string]string
	rng  *rand.Rand
	home string // the replica its turns went to
}

var prefixWords = strings.Fields("deploy build node cluster error retry disk memory cache token answer prompt replica " +
	"engine stream request latency budget quota tenant project team release canary rollback metric alert log trace")

func (c *prefixConv) say(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = prefixWords[c.rng.IntN(len(prefixWords))]
	}
	return strings.Join(w, " ")
}

type turnAnswer struct {
	replica        string
	prompt, cached int
	text           string
}

// turn sends the conversation's next user message and adds the answer.
func (c *prefixConv) turn(t *testing.T, g *gateway) (turnAnswer, error) {
	t.Helper()
	c.msgs = append(c.msgs, map[string]string{"role": "user", "content": c.say(120)})
	body, _ := json.Marshal(map[string]any{"model": "chat", "max_tokens": 8, "messages": c.msgs})
	resp, err := http.Post(g.base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		c.msgs = c.msgs[:len(c.msgs)-1]
		return turnAnswer{}, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		c.msgs = c.msgs[:len(c.msgs)-1]
		return turnAnswer{}, fmt.Errorf("status %d: %s", resp.StatusCode, raw)
	}
	var out struct {
		Choices []struct{ Message struct{ Content string } }
		Usage   struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	a := turnAnswer{replica: resp.Header.Get("X-Llm-Replica"), prompt: out.Usage.PromptTokens,
		cached: out.Usage.PromptTokensDetails.CachedTokens, text: out.Choices[0].Message.Content}
	c.msgs = append(c.msgs, map[string]string{"role": "assistant", "content": a.text})
	return a, nil
}

// prefix_affinity in front of sim replicas with the prefix-cache model
// (a simulator): interleaved conversations sharing a system prompt each
// keep to one replica, find their earlier turns cached there, and spread
// over the replicas; when a replica is killed, its conversations move
// without an error and stay on their new replicas.
func TestPrefixAffinityRouting(t *testing.T) {
	g := startGateway(t, `model chat {
			engine sim
			min 3
			max 3
			option prefix_cache_tokens 200000
		}`, "\t\t\tpolicy prefix_affinity {\n\t\t\t\tcache_tokens 200000\n\t\t\t}")
	reps := g.readyReplicas("chat", 3)
	system := (&prefixConv{rng: rand.New(rand.NewPCG(1, 1))}).say(600)
	convs := make([]*prefixConv, 12)
	for i := range convs {
		convs[i] = &prefixConv{rng: rand.New(rand.NewPCG(uint64(i)+10, 3)),
			msgs: []map[string]string{{"role": "system", "content": system}}}
	}
	perReplica := map[string]int{}
	var cached, prompt int
	for turn := range 4 {
		for i, c := range convs {
			a, err := c.turn(t, g)
			if err != nil {
				t.Fatalf("conversation %d, turn %d: %v", i, turn+1, err)
			}
			if turn == 0 {
				c.home = a.replica
				perReplica[a.replica]++
				continue
			}
			if a.replica != c.home {
				t.Errorf("conversation %d, turn %d went to %s; its earlier turns went to %s", i, turn+1, a.replica, c.home)
			}
			cached += a.cached
			prompt += a.prompt
		}
	}
	if len(perReplica) != 3 {
		t.Errorf("the conversations started on %v; want all three replicas used", perReplica)
	}
	for r, n := range perReplica {
		if n > 6 {
			t.Errorf("%d of 12 conversations started on %s", n, r)
		}
	}
	if share := float64(cached) / float64(prompt); share < 0.85 {
		t.Errorf("later turns found %.0f%% of their prompt tokens cached; want at least 85%%", 100*share)
	}
	metrics := g.metricsText()
	if !strings.Contains(metrics, `llmgw_prefix_routed_prompt_tokens_total{matched="true",model="chat"`) ||
		!strings.Contains(metrics, `llmgw_prefix_picks_total{model="chat",reason="prefix"`) {
		t.Errorf("the prefix metrics are missing:\n%s", grepLines(metrics, "llmgw_prefix"))
	}

	// Kill the replica with the most conversations.
	victim := ""
	for r, n := range perReplica {
		if victim == "" || n > perReplica[victim] {
			victim = r
		}
	}
	pid := 0
	for _, r := range reps {
		if r.ID == victim {
			pid = int(r.PID)
		}
	}
	if pid == 0 {
		t.Fatalf("no pid for replica %s in %+v", victim, reps)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	moved := map[int]string{}
	for turn := range 3 {
		for i, c := range convs {
			a, err := c.turn(t, g)
			if err != nil {
				t.Fatalf("after %s was killed, conversation %d: %v", victim, i, err)
			}
			if c.home != victim {
				if a.replica != c.home {
					t.Errorf("conversation %d of a live replica moved from %s to %s", i, c.home, a.replica)
				}
				continue
			}
			if a.replica == victim {
				t.Errorf("conversation %d was answered by the killed replica %s", i, victim)
			}
			if turn == 0 {
				moved[i] = a.replica
			} else if a.replica != moved[i] {
				t.Errorf("conversation %d moved again, from %s to %s; its new home should have been learned", i, moved[i], a.replica)
			}
		}
	}
	if len(moved) == 0 {
		t.Fatal("no conversation was on the killed replica")
	}
}

func (g *gateway) metricsText() string {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", g.admin))
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
