package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// MaxTopLogprobs is the most alternatives a token's top_logprobs may list,
// as vLLM's default max_logprobs.
const MaxTopLogprobs = 20

// logprobsAsked reads what the request asks of logprobs: whether to give
// them, and how many alternatives per token. Chat asks with logprobs true
// and top_logprobs; completions with logprobs, a number of alternatives.
// A value the engine cannot honour is an error naming the field.
func (r *request) logprobsAsked(chat bool) (logprobsWanted, error) {
	top := 0
	if r.TopLogprobs != nil {
		top = *r.TopLogprobs
	}
	if len(r.Logprobs) == 0 || string(r.Logprobs) == "null" {
		if top > 0 && chat {
			return logprobsWanted{}, errors.New("top_logprobs needs logprobs set to true")
		}
		return logprobsWanted{}, nil
	}
	if chat {
		var on bool
		switch {
		case json.Unmarshal(r.Logprobs, &on) != nil:
			return logprobsWanted{}, errors.New("logprobs must be a boolean")
		case top < 0 || top > MaxTopLogprobs:
			return logprobsWanted{}, fmt.Errorf("top_logprobs must be an integer from 0 to %d", MaxTopLogprobs)
		case top > 0 && !on:
			return logprobsWanted{}, errors.New("top_logprobs needs logprobs set to true")
		}
		return logprobsWanted{on: on, top: top}, nil
	}
	var n int
	if json.Unmarshal(r.Logprobs, &n) != nil || n < 0 || n > MaxTopLogprobs {
		return logprobsWanted{}, fmt.Errorf("logprobs must be an integer from 0 to %d", MaxTopLogprobs)
	}
	return logprobsWanted{on: true, top: n}, nil
}

// tokenLogprob is one generated token's log probability and the most
// likely alternatives at its place, the token itself first.
type tokenLogprob struct {
	token string
	lp    float64
	top   []alternative
}

type alternative struct {
	token string
	lp    float64
}

// logprobsOf makes plausible log probabilities for words: the chosen
// token is the likeliest, with probability from 0.4 to 1, and the
// alternatives share what is left, each less likely than the one before,
// so that the probabilities sum to at most 1.
func logprobsOf(words []string, top int, rng *rand.Rand) []tokenLogprob {
	out := make([]tokenLogprob, len(words))
	for i, w := range words {
		p := 0.4 + 0.6*rng.Float64()
		t := tokenLogprob{token: w, lp: math.Log(p), top: make([]alternative, 0, top)}
		rest := 1 - p
		for k := 0; k < top; k++ {
			if k == 0 {
				t.top = append(t.top, alternative{w, t.lp})
				continue
			}
			q := rest * (0.3 + 0.2*rng.Float64())
			rest -= q
			t.top = append(t.top, alternative{otherToken(t.top, rng), math.Log(max(q, 1e-12))})
		}
		out[i] = t
	}
	return out
}

// otherToken picks a word of the lexicon that is not yet among alts.
func otherToken(alts []alternative, rng *rand.Rand) string {
	for {
		w := " " + lexicon[rng.IntN(len(lexicon))]
		if !slices.ContainsFunc(alts, func(a alternative) bool { return a.token == w }) {
			return w
		}
	}
}

// chatEntry is a token's entry in chat's logprobs.content.
func (t tokenLogprob) chatEntry() map[string]any {
	top := make([]map[string]any, len(t.top))
	for i, a := range t.top {
		top[i] = map[string]any{"token": a.token, "logprob": a.lp, "bytes": tokenBytes(a.token)}
	}
	return map[string]any{"token": t.token, "logprob": t.lp, "bytes": tokenBytes(t.token), "top_logprobs": top}
}

func tokenBytes(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}

// chatLogprobs is a chat choice's logprobs: content, one entry per token.
func chatLogprobs(ts []tokenLogprob) map[string]any {
	content := make([]map[string]any, len(ts))
	for i, t := range ts {
		content[i] = t.chatEntry()
	}
	return map[string]any{"content": content, "refusal": nil}
}

// textLogprobs is a completion choice's logprobs in the legacy shape:
// tokens, token_logprobs, top_logprobs (token to logprob) and text_offset,
// counted from offset.
func textLogprobs(ts []tokenLogprob, offset int) map[string]any {
	tokens, lps := make([]string, len(ts)), make([]float64, len(ts))
	tops, offsets := make([]map[string]float64, len(ts)), make([]int, len(ts))
	for i, t := range ts {
		tokens[i], lps[i], offsets[i] = t.token, t.lp, offset
		offset += len(t.token)
		tops[i] = map[string]float64{t.token: t.lp}
		for _, a := range t.top {
			if _, dup := tops[i][a.token]; !dup {
				tops[i][a.token] = a.lp
			}
		}
	}
	return map[string]any{"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}
}
