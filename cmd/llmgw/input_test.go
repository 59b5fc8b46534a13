package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// apiError is an OpenAI error body, with every member of its shape.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeAPIError(t *testing.T, body []byte) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("body is not an OpenAI error: %s", body)
	}
	return e
}

// TestInputBounds sends what a careless or hostile client sends: values
// out of bounds and of the wrong type. Each is a 400 before anything
// reaches the engine, with the member named in param and a message that
// says what is expected.
func TestInputBounds(t *testing.T) {
	g := startGateway(t, simModels, "\t\t\tmax_messages 8")
	chat := `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}],`
	for _, tc := range []struct {
		name, path, body string
		param, code, msg string
	}{
		{"n -1", "/v1/chat/completions", chat + `"n":-1}`, "n", "invalid_value", "n must be an integer from 1 to 128"},
		{"n 0", "/v1/chat/completions", chat + `"n":0}`, "n", "invalid_value", "n must be an integer from 1 to 128"},
		{"n 1000", "/v1/chat/completions", chat + `"n":1000}`, "n", "invalid_value", "n must be an integer from 1 to 128"},
		{"n 2^31", "/v1/chat/completions", chat + `"n":2147483648}`, "n", "invalid_value", "n must be an integer from 1 to 128"},
		{"n above max_n", "/v1/chat/completions", chat + `"n":17}`, "n", "invalid_value", "n is 17, above this gateway's limit of 16"},
		{"max_tokens 2^31", "/v1/chat/completions", chat + `"max_tokens":2147483648}`, "max_tokens", "invalid_value", `above the context length of model "sim-chat" (4096 tokens)`},
		{"max_completion_tokens 2^31", "/v1/chat/completions", chat + `"max_completion_tokens":2147483648}`, "max_completion_tokens", "invalid_value", "above the context length"},
		{"max_tokens 0", "/v1/chat/completions", chat + `"max_tokens":0}`, "max_tokens", "invalid_value", "at least 1"},
		{"temperature 3", "/v1/chat/completions", chat + `"temperature":3}`, "temperature", "invalid_value", "temperature must be a number from 0 to 2"},
		{"temperature string", "/v1/chat/completions", chat + `"temperature":"warm"}`, "temperature", "invalid_type", "temperature must be a number"},
		{"top_p 2", "/v1/chat/completions", chat + `"top_p":2}`, "top_p", "invalid_value", "top_p must be a number from 0 to 1"},
		{"presence_penalty 9", "/v1/chat/completions", chat + `"presence_penalty":9}`, "presence_penalty", "invalid_value", "from -2 to 2"},
		{"stop 5", "/v1/chat/completions", chat + `"stop":["a","b","c","d","e"]}`, "stop", "invalid_value", "at most 4 strings"},
		{"tools object", "/v1/chat/completions", chat + `"tools":{"type":"function"}}`, "tools", "invalid_type", "tools must be an array of tool objects"},
		{"stream string", "/v1/chat/completions", chat + `"stream":"true"}`, "stream", "invalid_type", "stream must be a boolean"},
		{"content number", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":7}]}`, "messages[0].content", "invalid_type", "messages[0].content must be a string or an array of content parts"},
		{"role missing", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"content":"x"}]}`, "messages[0].role", "missing_required_parameter", "messages[0].role is missing"},
		{"too many messages", "/v1/chat/completions", `{"model":"sim-chat","messages":[` + strings.Repeat(`{"role":"user","content":"x"},`, 8) + `{"role":"user","content":"x"}]}`, "messages", "invalid_value", "messages has 9 items, above this gateway's limit of 8"},
		{"model number", "/v1/chat/completions", `{"model":1,"messages":[{"role":"user","content":"x"}]}`, "model", "invalid_type", "model must be a string"},
		{"completions n", "/v1/completions", `{"model":"sim-chat","prompt":"x","n":1000}`, "n", "invalid_value", "from 1 to 128"},
		{"completions max_tokens", "/v1/completions", `{"model":"sim-chat","prompt":"x","max_tokens":2147483648}`, "max_tokens", "invalid_value", "above the context length"},
		{"prompt object", "/v1/completions", `{"model":"sim-chat","prompt":{"text":"x"}}`, "prompt", "invalid_type", "prompt must be a string, an array of strings or an array of token arrays"},
		{"input number", "/v1/embeddings", `{"model":"sim-embed","input":3}`, "input", "invalid_type", "input must be a string, an array of strings"},
		{"input too many", "/v1/embeddings", `{"model":"sim-embed","input":[` + strings.Repeat(`"a",`, 2048) + `"a"]}`, "input", "invalid_value", "at most 2048 items"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, g.base+tc.path, tc.body)
			e := decodeAPIError(t, body)
			if resp.StatusCode != 400 || e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != tc.param ||
				e.Error.Code == nil || *e.Error.Code != tc.code {
				t.Errorf("got %d %s, want 400 invalid_request_error with param %s and code %s", resp.StatusCode, body, tc.param, tc.code)
			}
			if !strings.Contains(e.Error.Message, tc.msg) {
				t.Errorf("message: got %q, want it to contain %q", e.Error.Message, tc.msg)
			}
			if strings.Contains(e.Error.Message, "Go struct") || strings.Contains(e.Error.Message, "unmarshal") {
				t.Errorf("message names Go's types: %q", e.Error.Message)
			}
		})
	}

	t.Run("within bounds is served", func(t *testing.T) {
		resp, body := post(t, g.base+"/v1/chat/completions", chat+`"n":2,"max_tokens":3,"temperature":2,"top_p":0,"stop":["a","b","c","d"]}`)
		if resp.StatusCode != 200 {
			t.Fatalf("got %d %s", resp.StatusCode, body)
		}
	})

	t.Run("the official client sees the param", func(t *testing.T) {
		c := g.client()
		_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
			Model:    "sim-chat",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			N:        openai.Int(1000),
		})
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Param != "n" || oe.Code != "invalid_value" {
			t.Fatalf("got %v, want a 400 with param n", err)
		}
	})
}

// TestBodyLimits: a body over the gateway's limit, or over Caddy's
// request_body max_size, is a 413 in OpenAI's shape.
func TestBodyLimits(t *testing.T) {
	g := startGatewayBefore(t, simModels, "\t\trequest_body /v1/embeddings {\n\t\t\tmax_size 1MB\n\t\t}\n")
	big := `{"model":"sim-chat","messages":[{"role":"user","content":"` + strings.Repeat("a", 33<<20) + `"}]}`
	for _, tc := range []struct {
		name, path string
		body       io.Reader
		length     int64
	}{
		{"over 32 MiB, announced", "/v1/chat/completions", strings.NewReader(big), int64(len(big))},
		{"over 32 MiB, chunked", "/v1/chat/completions", io.MultiReader(strings.NewReader(big)), -1},
		{"over request_body max_size", "/v1/embeddings", strings.NewReader(`{"model":"sim-embed","input":"` + strings.Repeat("a", 2<<20) + `"}`), -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", g.base+tc.path, tc.body)
			req.ContentLength = tc.length
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := decodeAPIError(t, body)
			if resp.StatusCode != 413 || e.Error.Code == nil || *e.Error.Code != "body_too_large" {
				t.Errorf("got %d %s, want 413 body_too_large", resp.StatusCode, body)
			}
		})
	}
}

// TestSlowClientsAreCut: clients that send their headers or their body a
// byte a second have their connection closed by the server's default read
// timeouts, set because the config sets none.
func TestSlowClientsAreCut(t *testing.T) {
	g := startGateway(t, simModels, "")
	addr := fmt.Sprintf("127.0.0.1:%d", g.http)
	body := `{"model":"sim-chat","messages":[{"role":"user","content":"` + strings.Repeat("a", 400) + `"}]}`
	clients := map[string]struct{ head, trickle string }{
		"headers": {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", "X-Slow: " + strings.Repeat("a", 200)},
		"body": {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n", body},
	}
	var wg sync.WaitGroup
	for name, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answer, err := trickle(addr, c.head, c.trickle, 150*time.Second)
			if err != nil {
				t.Errorf("%s a byte a second: %v", name, err)
				return
			}
			t.Logf("%s a byte a second: connection closed; the server answered %q", name, firstLine(answer))
			if name == "body" && !strings.Contains(answer, " 408 ") {
				t.Errorf("slow body: got %q, want a 408", firstLine(answer))
			}
		}()
	}
	wg.Wait()
}

// trickle sends head, then rest a byte a second, until the server closes
// the connection; it returns what the server answered. It gives up after
// limit, only so that a broken server cannot hang the test.
func trickle(addr, head, rest string, limit time.Duration) (string, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, head); err != nil {
		return "", err
	}
	closed := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(conn) // until the server closes
		closed <- string(b)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	giveUp := time.After(limit)
	for i := 0; ; i++ {
		select {
		case answer := <-closed:
			return answer, nil
		case <-giveUp:
			return "", fmt.Errorf("the connection is still open after %d bytes", i)
		case <-tick.C:
			if i < len(rest) {
				_, _ = conn.Write([]byte{rest[i]}) // fails once the server closed; the reader sees it
			}
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}

// TestBigBodiesGiveMemoryBack: after a burst of 10 MB bodies the gateway's
// memory returns near where it was, without waiting for the runtime's
// collection every two minutes. It logs the figures.
func TestBigBodiesGiveMemoryBack(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector's shadow memory keeps RSS up; .ci/run runs this test without -race")
	}
	g := startGateway(t, simModels, "")
	floor := rss(t, g.cmd.Process.Pid)
	big := strings.Repeat("lorem ipsum ", 10<<20/12)
	bodies := []string{
		`{"model":"sim-chat","max_tokens":1,"messages":[{"role":"user","content":"` + big + `"}]}`,
		`{"model":"nope","messages":[{"role":"user","content":"` + big + `"}]}`,
		`{"model":"sim-chat","n":1000,"messages":[{"role":"user","content":"` + big + `"}]}`,
		`{"model":"sim-chat","messages":[{"role":"user","content":` + big,
	}
	var wg sync.WaitGroup
	work := make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				resp, err := http.Post(g.base+"/v1/chat/completions", "application/json", strings.NewReader(b))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	start := time.Now()
	for i := range 48 {
		work <- bodies[i%len(bodies)]
	}
	close(work)
	wg.Wait()
	peak, took := rss(t, g.cmd.Process.Pid), time.Since(start)
	var after int64
	waitFor(t, 30*time.Second, "the memory of the burst to be given back", func() bool {
		after = rss(t, g.cmd.Process.Pid)
		return after < floor+64<<20
	})
	t.Logf("RSS: %d MB before, %d MB at the end of a burst of 48 bodies of 10 MB (%s), %d MB after", floor>>20, peak>>20, took.Round(time.Millisecond), after>>20)
}

// rss is a process's resident memory in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(v)), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
