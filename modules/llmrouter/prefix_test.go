package llmrouter

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/openai"
)

// conversation is an agent's growing chat: a shared system prompt, then
// turns of user and assistant text.
type conversation struct {
	msgs []map[string]any
	rng  *rand.Rand
}

var words = strings.Fields("the a build deploy error function test value cluster node request answer model token cache " +
	"prefix route replica engine prompt stream user system tool call result file line code change review plan")

func sentence(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}

func newConversation(system string, seed uint64) *conversation {
	c := &conversation{rng: rand.New(rand.NewPCG(seed, seed*7+1))}
	c.msgs = append(c.msgs, map[string]any{"role": "system", "content": system})
	return c
}

// turn adds a user message and returns the request body.
func (c *conversation) turn(t testing.TB) *openai.Request {
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": sentence(c.rng, 150)})
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": c.msgs})
	req, err := openai.Parse(openai.ChatCompletions, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// answer adds the assistant's answer.
func (c *conversation) answer() {
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": sentence(c.rng, 60)})
}

func newPolicy(t testing.TB, p *PrefixAffinity, model string) *PrefixAffinity {
	if err := p.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	indexes.Delete(model)
	return p
}

func replicas(model string, n int) []*fleet.Replica {
	out := make([]*fleet.Replica, n)
	for i := range out {
		out[i] = fleet.NewStandaloneReplica(fmt.Sprintf("%s-%d", model, i), model)
	}
	return out
}

// Interleaved conversations stay on one replica each, and the replicas
// share the load.
func TestPrefixAffinityKeepsConversations(t *testing.T) {
	p := newPolicy(t, &PrefixAffinity{}, "keep")
	reps := replicas("keep", 4)
	system := sentence(rand.New(rand.NewPCG(1, 2)), 1500)
	convs := make([]*conversation, 40)
	home := make([]*fleet.Replica, len(convs))
	for i := range convs {
		convs[i] = newConversation(system, uint64(i+1))
	}
	picks := map[*fleet.Replica]int{}
	stayed, moved := 0, 0
	for range 8 {
		for i, c := range convs {
			r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
			got := p.forRequest(r, c.turn(t), "keep").Select(reps)
			picks[got]++
			switch {
			case home[i] == nil:
				home[i] = got
			case home[i] == got:
				stayed++
			default:
				moved++
			}
			c.answer()
		}
	}
	if moved > 0 {
		t.Errorf("%d of %d later turns moved to another replica; want none while the load is even", moved, stayed+moved)
	}
	lo, hi := 1<<30, 0
	for _, r := range reps {
		lo, hi = min(lo, picks[r]), max(hi, picks[r])
	}
	if float64(hi) > 1.3*float64(lo) {
		t.Errorf("picks per replica %v: max/min %.2f, want ≤ 1.3", picks, float64(hi)/float64(lo))
	}
}

// With few requests in flight, new conversations spread by what each
// replica holds rather than by its requests in flight alone: the
// replica a turn has just left (none in flight) does not take every new
// conversation while the others serve one request each.
func TestPrefixAffinitySpreadsNewConversations(t *testing.T) {
	p := newPolicy(t, &PrefixAffinity{}, "spread")
	reps := replicas("spread", 4)
	system := sentence(rand.New(rand.NewPCG(5, 6)), 1500)
	homes := map[*fleet.Replica]int{}
	for i := range 16 {
		// Every replica but the one with most conversations serves one
		// request, as when each of a few clients waits for its turn.
		busiest := reps[0]
		for _, r := range reps {
			if homes[r] > homes[busiest] {
				busiest = r
			}
		}
		var releases []func()
		for _, r := range reps {
			if r != busiest {
				releases = append(releases, r.Hold())
			}
		}
		c := newConversation(system, uint64(100+i))
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		homes[p.forRequest(r, c.turn(t), "spread").Select(reps)]++
		for _, rel := range releases {
			rel()
		}
	}
	for _, r := range reps {
		if homes[r] < 3 || homes[r] > 5 {
			t.Errorf("16 new conversations on 4 replicas: %s got %d; want about 4 each", r.ID, homes[r])
		}
	}
}

// A new conversation goes to the replica keeping fewer conversations,
// even when its few conversations are long ones that hold more blocks
// (they ran fast there) than a crowded replica's many short ones.
func TestPrefixAffinityCountsConversations(t *testing.T) {
	p := newPolicy(t, &PrefixAffinity{}, "convs")
	reps := replicas("convs", 2)
	few, crowded := reps[:1], reps[1:]
	system := sentence(rand.New(rand.NewPCG(9, 9)), 1500)
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	long := newConversation(system, 300)
	for range 8 {
		p.forRequest(r, long.turn(t), "convs").Select(few)
		long.answer()
	}
	for i := range 3 {
		c := newConversation(system, uint64(301+i))
		p.forRequest(r, c.turn(t), "convs").Select(crowded)
	}
	if got := p.forRequest(r, newConversation(system, 400).turn(t), "convs").Select(reps); got != few[0] {
		t.Errorf("a new conversation went to %s, which keeps 3 conversations, not to %s, which keeps one", got.ID, few[0].ID)
	}
}

// An overloaded best match loses to the least loaded replica, and the
// conversation's next turn follows it to its new home.
func TestPrefixAffinityYieldsToLoad(t *testing.T) {
	p := newPolicy(t, &PrefixAffinity{BalanceAbs: 2, BalanceRel: 1.5}, "load")
	reps := replicas("load", 2)
	c := newConversation(sentence(rand.New(rand.NewPCG(3, 4)), 800), 9)
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	first := p.forRequest(r, c.turn(t), "load").Select(reps)
	c.answer()
	var releases []func()
	for range 6 {
		releases = append(releases, first.Hold())
	}
	second := p.forRequest(r, c.turn(t), "load").Select(reps)
	if second == first {
		t.Fatalf("the turn went to %s with 6 requests in flight against 0", first.ID)
	}
	for _, rel := range releases {
		rel()
	}
	c.answer()
	if third := p.forRequest(r, c.turn(t), "load").Select(reps); third != second {
		t.Fatalf("the next turn went to %s, not to the new home %s", third.ID, second.ID)
	}
	// A small imbalance does not move it.
	release := second.Hold()
	defer release()
	c.answer()
	if fourth := p.forRequest(r, c.turn(t), "load").Select(reps); fourth != second {
		t.Fatalf("one request in flight moved the conversation to %s", fourth.ID)
	}
}

// prompt_cache_key (or user, or the header) keeps short prompts, which
// have no full block, on one replica.
func TestPrefixAffinitySessionKey(t *testing.T) {
	p := newPolicy(t, &PrefixAffinity{Header: "X-Session"}, "sess")
	reps := replicas("sess", 3)
	for _, tc := range []struct {
		body, header string
	}{
		{`{"model":"m","prompt_cache_key":"conv-7","messages":[{"role":"user","content":"hi %d"}]}`, ""},
		{`{"model":"m","user":"ana","messages":[{"role":"user","content":"hi %d"}]}`, ""},
		{`{"model":"m","messages":[{"role":"user","content":"hi %d"}]}`, "s-42"},
	} {
		var first *fleet.Replica
		for i := range 12 {
			req, err := openai.Parse(openai.ChatCompletions, fmt.Appendf(nil, tc.body, i))
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
			if tc.header != "" {
				r.Header.Set("X-Session", tc.header)
			}
			// Other traffic spreads the load meanwhile.
			release := reps[i%3].Hold()
			got := p.forRequest(r, req, "sess").Select(reps)
			release()
			if first == nil {
				first = got
			} else if got != first {
				t.Fatalf("%s: request %d went to %s, the session's first to %s", tc.body, i, got.ID, first.ID)
			}
		}
	}
}

// A replica that stops loses its part of the index; its conversations
// move and stay on their new homes.
func TestPrefixAffinityReplicaStops(t *testing.T) {
	p := newPolicy(t, &PrefixAffinity{}, "stop")
	reps := replicas("stop", 3)
	convs := make([]*conversation, 12)
	home := map[int]*fleet.Replica{}
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	for i := range convs {
		convs[i] = newConversation(sentence(rand.New(rand.NewPCG(5, 6)), 600), uint64(100+i))
		home[i] = p.forRequest(r, convs[i].turn(t), "stop").Select(reps)
		convs[i].answer()
	}
	gone := reps[0]
	gone.SetState("stopped")
	ix := indexOf("stop", p)
	ix.mu.Lock()
	ix.swept = 0 // sweep at the next pick
	ix.mu.Unlock()
	alive := reps[1:]
	newHome := map[int]*fleet.Replica{}
	for i, c := range convs {
		newHome[i] = p.forRequest(r, c.turn(t), "stop").Select(alive)
		c.answer()
	}
	ix.mu.Lock()
	_, kept := ix.byID[gone.ID]
	for h, b := range ix.blocks {
		if b.slots&1 != 0 && ix.slots[0].id == "" {
			t.Errorf("block %x still names the stopped replica's slot", h)
			break
		}
	}
	ix.mu.Unlock()
	if kept {
		t.Fatal("the stopped replica still has a slot in the index")
	}
	for i, c := range convs {
		if got := p.forRequest(r, c.turn(t), "stop").Select(alive); got != newHome[i] {
			t.Errorf("conversation %d (first on %s) moved again: %s then %s", i, home[i].ID, newHome[i].ID, got.ID)
		}
		c.answer()
	}
}

// A minute without picks (every request a long one) keeps every
// replica's part of the index; a replica left out of the picks of a
// minute (held back, or no longer offered by its node) loses it.
func TestPrefixAffinityPauseKeepsHomes(t *testing.T) {
	p := newPolicy(t, &PrefixAffinity{}, "pause")
	reps := replicas("pause", 3)
	convs := make([]*conversation, 6)
	home := map[int]*fleet.Replica{}
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	for i := range convs {
		convs[i] = newConversation(sentence(rand.New(rand.NewPCG(7, 8)), 600), uint64(200+i))
		home[i] = p.forRequest(r, convs[i].turn(t), "pause").Select(reps)
		convs[i].answer()
	}
	ix := indexOf("pause", p)
	ago := func(d time.Duration) {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		for i := range ix.slots {
			ix.slots[i].seen -= int64(d)
		}
		ix.picked -= int64(d)
		ix.swept = 0 // sweep at the next pick
	}
	heldOf := func() map[string]int {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		out := map[string]int{}
		for _, s := range ix.slots {
			if s.id != "" {
				out[s.id] = len(s.held)
			}
		}
		return out
	}
	before := heldOf()
	ago(2 * time.Minute) // no pick for two minutes
	for i, c := range convs {
		if i == 1 {
			// One pick later, the other replicas' parts are as they were.
			after := heldOf()
			for _, rep := range reps {
				if rep != home[0] && after[rep.ID] != before[rep.ID] {
					t.Errorf("after two minutes without a pick, %s holds %d blocks of the index, not %d", rep.ID, after[rep.ID], before[rep.ID])
				}
			}
		}
		if got := p.forRequest(r, c.turn(t), "pause").Select(reps); got != home[i] {
			t.Errorf("after two minutes without a pick, conversation %d moved from %s to %s", i, home[i].ID, got.ID)
		}
		c.answer()
	}
	// Picks go on for a minute without reps[0].
	ix.mu.Lock()
	ix.slots[ix.byID[reps[0].ID]].seen -= int64(2 * time.Minute)
	ix.swept = 0
	ix.mu.Unlock()
	p.forRequest(r, convs[0].turn(t), "pause").Select(reps[1:])
	ix.mu.Lock()
	_, kept := ix.byID[reps[0].ID]
	ix.mu.Unlock()
	if kept {
		t.Error("a replica missing from the picks of two minutes kept its part of the index")
	}
}

// Each replica holds at most cache_tokens of blocks.
func TestPrefixAffinityEvicts(t *testing.T) {
	p := newPolicy(t, &PrefixAffinity{CacheTokens: 4096, BlockBytes: 256}, "evict") // 64 blocks a replica
	reps := replicas("evict", 2)
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	for i := range 50 {
		c := newConversation(sentence(rand.New(rand.NewPCG(uint64(i), 1)), 400), uint64(i))
		p.forRequest(r, c.turn(t), "evict").Select(reps)
	}
	ix := indexOf("evict", p)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for i := range 2 {
		if n := len(ix.slots[i].held); n > 64 {
			t.Errorf("replica %d holds %d blocks, over its 64", i, n)
		}
	}
	if len(ix.blocks) > 128 {
		t.Errorf("the index has %d blocks for 2 replicas of 64", len(ix.blocks))
	}
}

// BenchmarkPrefixAffinityPick is one pick among 16 replicas whose index
// holds 10,000 live conversations (a 2k-token system prompt and up to
// twelve turns each); it reports the index's memory per conversation.
func BenchmarkPrefixAffinityPick(b *testing.B) {
	p := newPolicy(b, &PrefixAffinity{CacheTokens: 1 << 22}, "bench")
	reps := replicas("bench", 16)
	system := sentence(rand.New(rand.NewPCG(7, 7)), 1500)
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const live = 10000
	reqs := make([]*openai.Request, 0, 256)
	for i := range live {
		c := newConversation(system, uint64(i))
		turns := 1 + i%12
		for range turns {
			req := c.turn(b)
			p.forRequest(r, req, "bench").Select(reps)
			c.answer()
			if i < 256 && len(reqs) <= i {
				reqs = append(reqs, req)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perConversation := float64(after.HeapAlloc-before.HeapAlloc) / live
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.forRequest(r, reqs[i%len(reqs)], "bench").Select(reps)
		i++
	}
	b.ReportMetric(perConversation, "index-bytes/conversation")
}
