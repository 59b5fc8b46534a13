package llmrouter

import (
	"net/http"
	"strconv"
	"time"
)

// What a provider says of its rate limits on each answer: OpenAI's
// x-ratelimit-* headers (remaining and limit of requests and tokens, and
// when each resets, as a duration such as 6m0s) and Anthropic's
// anthropic-ratelimit-* (the reset as a time).
var rateHeaders = [2]struct {
	remReq, limReq, resetReq, remTok, limTok, resetTok string
}{
	{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Limit-Requests", "X-Ratelimit-Reset-Requests",
		"X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Reset-Tokens"},
	{"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Reset",
		"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Reset"},
}

// headroomUnknown is the headroom of a provider that never said.
const headroomUnknown = 1_000_000

// learnLimits reads a provider's rate-limit headers: its headroom (the
// smaller share of requests and tokens it has left, in millionths) and,
// when one is spent, until when it rests. It reports false when the
// answer carries none.
func learnLimits(h http.Header, now int64) (headroom, restUntil int64, ok bool) {
	for _, k := range rateHeaders {
		rq, lq, okq := headerPair(h, k.remReq, k.limReq)
		rt, lt, okt := headerPair(h, k.remTok, k.limTok)
		if !okq && !okt {
			continue
		}
		headroom = headroomUnknown
		if okq {
			headroom = min(headroom, rq*headroomUnknown/lq)
			if rq == 0 {
				restUntil = max(restUntil, resetAt(h.Get(k.resetReq), now))
			}
		}
		if okt {
			headroom = min(headroom, rt*headroomUnknown/lt)
			if rt == 0 {
				restUntil = max(restUntil, resetAt(h.Get(k.resetTok), now))
			}
		}
		return headroom, restUntil, true
	}
	return 0, 0, false
}

func headerPair(h http.Header, rem, lim string) (int64, int64, bool) {
	rs, ls := h.Get(rem), h.Get(lim)
	if rs == "" || ls == "" {
		return 0, 0, false // most answers: no parse, no error to allocate
	}
	r, err1 := strconv.ParseInt(rs, 10, 64)
	l, err2 := strconv.ParseInt(ls, 10, 64)
	if err1 != nil || err2 != nil || l <= 0 || r < 0 {
		return 0, 0, false
	}
	return min(r, l), l, true
}

// resetAt reads a reset as a duration (6m0s, 20ms) or a time (RFC 3339),
// bounded to 10 minutes from now; a second when it says neither.
func resetAt(v string, now int64) int64 {
	d := time.Second
	if x, err := time.ParseDuration(v); err == nil {
		d = x
	} else if t, err := time.Parse(time.RFC3339, v); err == nil {
		d = time.Duration(t.UnixNano() - now)
	}
	return now + int64(min(max(d, 0), 10*time.Minute))
}
