package llmrouter

import (
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// upstream is one model of a test's catalog and the provider behind it.
type upstream struct {
	name    string
	answer  http.HandlerFunc  // nil: nothing listens, connecting is refused
	options map[string]string // more engine options
}

// startChain starts a provider for each upstream and a router whose
// catalog has a model for each, the first with the others as its
// fallbacks, in order. It returns the router's base URL and the providers
// (nil for a refused one).
func startChain(t *testing.T, router string, ups []upstream) (string, []*provider) {
	t.Helper()
	provs := make([]*provider, len(ups))
	models := make([]model, len(ups))
	for i, u := range ups {
		models[i] = model{name: u.name, baseURL: refusedURL(t), options: u.options}
		if u.answer != nil {
			provs[i] = startProvider(t, u.name, u.answer)
			models[i].baseURL = provs[i].url
		}
		if i > 0 {
			models[0].fallbacks = append(models[0].fallbacks, u.name)
		}
	}
	return startRouter(t, router, models...), provs
}

// checkHits checks how many requests each provider got.
func checkHits(t *testing.T, provs []*provider, want []int) {
	t.Helper()
	for i, p := range provs {
		if p == nil {
			continue
		}
		if got := p.hits(); got != want[i] {
			t.Errorf("provider %s got %d requests, want %d", p.name, got, want[i])
		}
	}
}

// TestFallbacks: a model that fails before its answer's first byte
// (connect error, 5xx, 429, no ready replica) hands the request to its
// fallbacks, in order; the last candidate's failure, and any other
// status, reaches the client as the provider sent it.
func TestFallbacks(t *testing.T) {
	good := func(who string) http.HandlerFunc { return answerWith(200, chatAnswer(who)) }
	drop := func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) } // the connection drops, no answer
	for _, tc := range []struct {
		name       string
		ups        []upstream // the requested model, then its fallbacks
		wantStatus int
		wantFrom   string // whose answer the client got, or "" for an error
		wantCode   string // the error's code, when the gateway made it
		wantBody   string // part of the body, when a provider's error passes through
		wantHeader map[string]string
		wantHits   []int
	}{{
		name:       "a good answer is served as it is",
		ups:        []upstream{{name: "primary", answer: good("primary")}, {name: "backup", answer: good("backup")}},
		wantStatus: 200, wantFrom: "primary", wantHits: []int{1, 0},
	}, {
		name:       "a 500 falls back",
		ups:        []upstream{{name: "primary", answer: answerWith(500, `{"error":{"message":"boom"}}`)}, {name: "backup", answer: good("backup")}},
		wantStatus: 200, wantFrom: "backup", wantHits: []int{1, 1},
	}, {
		name: "a 429 with Retry-After falls back, and the client sees no Retry-After",
		ups: []upstream{{name: "primary", answer: answerWith(429, `{"error":{"message":"slow down"}}`, "Retry-After", "7")},
			{name: "backup", answer: good("backup")}},
		wantStatus: 200, wantFrom: "backup", wantHeader: map[string]string{"Retry-After": ""}, wantHits: []int{1, 1},
	}, {
		name: "fallbacks are tried in order until one answers",
		ups: []upstream{{name: "primary", answer: answerWith(503, `{}`)}, {name: "second", answer: answerWith(429, `{}`)},
			{name: "third", answer: good("third")}, {name: "fourth", answer: good("fourth")}},
		wantStatus: 200, wantFrom: "third", wantHits: []int{1, 1, 1, 0},
	}, {
		name:       "a connection refused falls back",
		ups:        []upstream{{name: "primary"}, {name: "backup", answer: good("backup")}},
		wantStatus: 200, wantFrom: "backup", wantHits: []int{0, 1},
	}, {
		name:       "a dropped connection is tried twice more on the model's replica that replaces it, then falls back",
		ups:        []upstream{{name: "primary", answer: drop}, {name: "backup", answer: good("backup")}},
		wantStatus: 200, wantFrom: "backup", wantHits: []int{3, 1},
	}, {
		name:       "a dropped connection with no fallback is a 502 upstream_unreachable after three tries",
		ups:        []upstream{{name: "primary", answer: drop}},
		wantStatus: 502, wantCode: "upstream_unreachable", wantHits: []int{3},
	}, {
		name: "no ready replica falls back",
		ups: []upstream{{name: "primary", answer: good("primary"), options: map[string]string{"api_key": "k", "api_key_header": "not a header"}},
			{name: "backup", answer: good("backup")}},
		wantStatus: 200, wantFrom: "backup", wantHits: []int{0, 1},
	}, {
		name:       "the last candidate's 5xx reaches the client",
		ups:        []upstream{{name: "primary", answer: answerWith(500, `{}`)}, {name: "backup", answer: answerWith(502, `{"error":{"message":"backup is down"}}`)}},
		wantStatus: 502, wantBody: "backup is down", wantHits: []int{1, 1},
	}, {
		name:       "a 429 with Retry-After and no fallback reaches the client with its Retry-After",
		ups:        []upstream{{name: "primary", answer: answerWith(429, `{"error":{"message":"slow down"}}`, "Retry-After", "7")}},
		wantStatus: 429, wantBody: "slow down", wantHeader: map[string]string{"Retry-After": "7"}, wantHits: []int{1},
	}, {
		name:       "a 429 without Retry-After and no fallback reaches the client without one",
		ups:        []upstream{{name: "primary", answer: answerWith(429, `{"error":{"message":"slow down"}}`)}},
		wantStatus: 429, wantBody: "slow down", wantHeader: map[string]string{"Retry-After": ""}, wantHits: []int{1},
	}, {
		name:       "a 400 is the client's: no fallback",
		ups:        []upstream{{name: "primary", answer: answerWith(400, `{"error":{"message":"bad messages"}}`)}, {name: "backup", answer: good("backup")}},
		wantStatus: 400, wantBody: "bad messages", wantHits: []int{1, 0},
	}, {
		name:       "a connection refused with no fallback is a 502 upstream_unreachable",
		ups:        []upstream{{name: "primary"}},
		wantStatus: 502, wantCode: "upstream_unreachable", wantBody: "connection refused", wantHits: []int{0},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			base, provs := startChain(t, "", tc.ups)
			resp, body := chat(t, base, tc.ups[0].name, false)
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status: got %d, want %d (body %s)", resp.StatusCode, tc.wantStatus, body)
			}
			if tc.wantFrom != "" && body != chatAnswer(tc.wantFrom) {
				t.Errorf("body: got %s, want %s's answer", body, tc.wantFrom)
			}
			if got := errorCode(body); tc.wantCode != "" && got != tc.wantCode {
				t.Errorf("error code: got %q, want %q (body %s)", got, tc.wantCode, body)
			}
			if !strings.Contains(body, tc.wantBody) {
				t.Errorf("body: got %s, want it to contain %q", body, tc.wantBody)
			}
			for k, v := range tc.wantHeader {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("header %s: got %q, want %q", k, got, v)
				}
			}
			checkHits(t, provs, tc.wantHits)
		})
	}
}

// TestNoRetryAfterFirstByte: a stream that breaks after its first event
// is not retried anywhere (the client has part of an answer): the client
// gets the event, then an error event, and the stream ends. A stream that
// fails before its first byte falls back like any request, and a
// first_byte_timeout is not a reason to fall back to another model (a
// provider's is: TestProviderFirstByteTimeout).
func TestNoRetryAfterFirstByte(t *testing.T) {
	event := "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"from primary\"}}]}\n\n"
	breaks := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = w.Write([]byte(event))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-stream
	}
	streams := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"from backup\"}}]}\n\ndata: [DONE]\n\n"))
	}
	slow := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
	for _, tc := range []struct {
		name       string
		router     string
		primary    http.HandlerFunc
		stream     bool
		wantStatus int
		want       []string // parts of the body, in order
		wantHits   []int    // primary's, backup's
	}{{
		name: "a stream that breaks after its first event ends with an error event, not a retry", primary: breaks, stream: true,
		wantStatus: 200, want: []string{"from primary", `"code":"upstream_stream_error"`}, wantHits: []int{1, 0},
	}, {
		name: "a stream that fails before its first byte falls back", primary: answerWith(503, `{}`), stream: true,
		wantStatus: 200, want: []string{"from backup", "[DONE]"}, wantHits: []int{1, 1},
	}, {
		name: "first_byte_timeout is a 504 and does not fall back", router: `{"first_byte_timeout":"300ms"}`, primary: slow,
		wantStatus: 504, want: []string{`"code":"upstream_timeout"`}, wantHits: []int{1, 0},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			base, provs := startChain(t, tc.router, []upstream{{name: "primary", answer: tc.primary}, {name: "backup", answer: streams}})
			resp, body := chat(t, base, "primary", tc.stream)
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status: got %d, want %d (body %s)", resp.StatusCode, tc.wantStatus, body)
			}
			rest := body
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("body %q: want %q (after the parts before it)", body, w)
				}
				rest = rest[i+len(w):]
			}
			checkHits(t, provs, tc.wantHits)
		})
	}
}

// TestKeyRotation: a model's keys are used in turn; a provider that
// refuses one (401 revoked, 429 out of quota) sees the same request again
// with another, and the refused key rests (a 429's for its Retry-After)
// while later requests use the others; when every key is refused the last
// refusal reaches the client (each request tries each key once).
func TestKeyRotation(t *testing.T) {
	refuse := func(status int, refused ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			for _, k := range refused {
				if k == key {
					answerWith(status, `{"error":{"message":"key `+key+` refused"}}`)(w, r)
					return
				}
			}
			answerWith(200, chatAnswer("key "+key))(w, r)
		}
	}
	for _, tc := range []struct {
		name     string
		answer   http.HandlerFunc
		want     []int    // statuses of two requests in turn
		wantKeys []string // the keys the provider saw, in order
	}{{
		name: "keys are used in turn", answer: refuse(401),
		want: []int{200, 200, 200}, wantKeys: []string{"k1", "k2", "k1"},
	}, {
		name: "a 401 moves to the next key", answer: refuse(401, "k1"),
		want: []int{200, 200}, wantKeys: []string{"k1", "k2", "k2"},
	}, {
		name: "a 429 moves to the next key", answer: refuse(429, "k1"),
		want: []int{200, 200}, wantKeys: []string{"k1", "k2", "k2"},
	}, {
		name: "when every key is refused the client gets the last refusal", answer: refuse(401, "k1", "k2"),
		want: []int{401, 401}, wantKeys: []string{"k1", "k2", "k1", "k2"},
	}, {
		name: "a 500 is not the key's fault: it is not tried with another", answer: answerWith(500, `{"error":{"message":"boom"}}`),
		want: []int{500, 500}, wantKeys: []string{"k1", "k2"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProvider(t, "p", tc.answer)
			base := startRouter(t, "", model{name: "m", baseURL: p.url, apiKey: "k1,k2"})
			for i, want := range tc.want {
				if resp, body := chat(t, base, "m", false); resp.StatusCode != want {
					t.Errorf("request %d: got %d %s, want %d", i+1, resp.StatusCode, body, want)
				}
			}
			if got := p.keysSeen(); strings.Join(got, ",") != strings.Join(tc.wantKeys, ",") {
				t.Errorf("keys the provider saw: got %v, want %v", got, tc.wantKeys)
			}
		})
	}
}

// TestKeyRestsForRetryAfter: a key a provider answers 429 with
// Retry-After rests that long while the model's other key serves, and is
// used again after it.
func TestKeyRestsForRetryAfter(t *testing.T) {
	var limited atomic.Bool
	limited.Store(true)
	p := startProvider(t, "p", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer k1" && limited.Load() {
			w.Header().Set("Retry-After", "1")
			answerWith(429, `{"error":{"message":"slow down"}}`)(w, r)
			return
		}
		answerWith(200, chatAnswer("ok"))(w, r)
	})
	base := startRouter(t, "", model{name: "m", baseURL: p.url, apiKey: "k1,k2"})
	for i := range 4 {
		if resp, body := chat(t, base, "m", false); resp.StatusCode != 200 {
			t.Fatalf("request %d while k1 is limited: got %d %s, want 200", i+1, resp.StatusCode, body)
		}
	}
	if got := strings.Join(p.keysSeen(), ","); got != "k1,k2,k2,k2,k2" {
		t.Errorf("keys seen while k1 rests: got %s, want k1 (429) then only k2", got)
	}
	limited.Store(false)
	time.Sleep(1100 * time.Millisecond)
	for range 2 {
		chat(t, base, "m", false)
	}
	if got := p.keysSeen(); !slices.Contains(got[5:], "k1") {
		t.Errorf("keys seen after its Retry-After: got %v, want k1 used again", got[5:])
	}
}
