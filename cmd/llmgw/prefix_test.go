package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// prefixConv is a conversation of the prefix-affinity tests.
type prefixConv struct {
	msgs  []map[string]string
	rng   *rand.Rand
	home  string // the replica its turns went to
	key   string // the API key it sends, if any
	model string // the model it asks for; default chat
	last  int    // the prompt tokens of its last turn
}

// checkCached fails unless a turn found (nearly) all of the conversation's
// previous prompt cached: all but the last partial block of 16 tokens.
func (c *prefixConv) checkCached(t *testing.T, i int, a turnAnswer) {
	t.Helper()
	if c.last > 0 && float64(a.cached) < 0.9*float64(c.last) {
		t.Errorf("conversation %d: %d of %d prompt tokens cached; the previous turn's prompt was %d tokens", i, a.cached, a.prompt, c.last)
	}
	c.last = a.prompt
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
	model := c.model
	if model == "" {
		model = "chat"
	}
	body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 8, "messages": c.msgs})
	req, _ := http.NewRequest(http.MethodPost, g.base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := http.DefaultClient.Do(req)
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
	for turn := range 4 {
		for i, c := range convs {
			a, err := c.turn(t, g)
			if err != nil {
				t.Fatalf("conversation %d, turn %d: %v", i, turn+1, err)
			}
			c.checkCached(t, i, a)
			if turn == 0 {
				c.home = a.replica
				perReplica[a.replica]++
				continue
			}
			if a.replica != c.home {
				t.Errorf("conversation %d, turn %d went to %s; its earlier turns went to %s", i, turn+1, a.replica, c.home)
			}
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

// Under prefix_affinity a canary's share is of conversations: every turn
// of a conversation goes to the same model (and there to the same
// replica, which has its earlier turns cached), and the conversations
// split between the model and its canary. A model's fallback keeps
// conversations together the same way.
func TestPrefixAffinityCanaryAndFallback(t *testing.T) {
	sim := func(name, extra string) string {
		return fmt.Sprintf("model %s {\n\t\t\tengine sim\n\t\t\tmin 2\n\t\t\tmax 2\n\t\t\toption prefix_cache_tokens 200000\n%s\t\t}\n\t\t", name, extra)
	}
	g := startGateway(t, sim("chat", "\t\t\tcanary chat-next 50%\n")+sim("chat-next", "")+sim("backup", "")+
		"model flaky {\n\t\t\tengine sim\n\t\t\toption fail_status 503\n\t\t\tfallback backup\n\t\t}",
		"\t\t\tpolicy prefix_affinity {\n\t\t\t\tcache_tokens 200000\n\t\t\t}")
	modelOf := map[string]string{}
	for _, m := range []string{"chat", "chat-next", "backup"} {
		for _, r := range g.readyReplicas(m, 2) {
			modelOf[r.ID] = m
		}
	}
	g.readyReplicas("flaky", 1)
	system := (&prefixConv{rng: rand.New(rand.NewPCG(2, 2))}).say(400)
	run := func(model string, n int) map[string]int {
		convs := make([]*prefixConv, n)
		for i := range convs {
			convs[i] = &prefixConv{rng: rand.New(rand.NewPCG(uint64(i)+100, 7)), model: model,
				msgs: []map[string]string{{"role": "system", "content": system}}}
		}
		perModel := map[string]int{}
		for turn := range 3 {
			for i, c := range convs {
				a, err := c.turn(t, g)
				if err != nil {
					t.Fatalf("%s conversation %d, turn %d: %v", model, i, turn+1, err)
				}
				c.checkCached(t, i, a)
				if turn == 0 {
					c.home = a.replica
					perModel[modelOf[a.replica]]++
				} else if a.replica != c.home {
					t.Errorf("%s conversation %d, turn %d went to %s (%s); its first turn went to %s (%s)", model, i, turn+1,
						a.replica, modelOf[a.replica], c.home, modelOf[c.home])
				}
			}
		}
		return perModel
	}
	split := run("chat", 24)
	if split["chat"]+split["chat-next"] != 24 || split["chat-next"] < 4 || split["chat-next"] > 20 {
		t.Errorf("24 conversations with a 50%% canary started on %v; want both models used, about half each", split)
	}
	if fb := run("flaky", 8); fb["backup"] != 8 {
		t.Errorf("8 conversations of a failing model with a fallback started on %v; want all on backup", fb)
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

// prefix_affinity across a cluster: a node routes conversations to
// replicas on itself and on another node (through that node's llmgw),
// each keeps to its replica, and finds its earlier turns cached there.
func TestPrefixAffinityAcrossNodes(t *testing.T) {
	c := &cluster{t: t, redis: startRedis(t), nodes: map[string]*gateway{}, peer: map[string]string{},
		router: "\t\t\tpolicy prefix_affinity",
		models: fmt.Sprintf(`
		model chat {
			engine sim
			min 2
			max 2
			option prefix_cache_tokens 200000
		}
		org acme {
			team research {
				project alpha {
					key k1 %s
				}
			}
		}`, tenancy.HashKey("secret-1"))}
	n1 := c.add("n1")
	c.add("n2")
	waitFor(t, 30*time.Second, "a replica of chat on each node", func() bool {
		return slices.Equal(n1.readyOn("chat"), []string{"n1", "n2"})
	})
	system := (&prefixConv{rng: rand.New(rand.NewPCG(2, 2))}).say(500)
	convs := make([]*prefixConv, 8)
	for i := range convs {
		convs[i] = &prefixConv{rng: rand.New(rand.NewPCG(uint64(i)+50, 5)), key: "secret-1",
			msgs: []map[string]string{{"role": "system", "content": system}}}
	}
	homes := map[string]int{}
	for turn := range 4 {
		for i, cv := range convs {
			a, err := cv.turn(t, n1)
			if err != nil {
				t.Fatalf("conversation %d, turn %d: %v", i, turn+1, err)
			}
			cv.checkCached(t, i, a)
			switch {
			case turn == 0:
				cv.home = a.replica
				homes[a.replica]++
			case a.replica != cv.home:
				t.Errorf("conversation %d, turn %d went to %s; its earlier turns went to %s", i, turn+1, a.replica, cv.home)
			}
		}
	}
	if len(homes) != 2 {
		t.Errorf("the conversations started on %v; want both nodes' replicas", homes)
	}
}
