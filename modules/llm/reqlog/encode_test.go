package reqlog

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// TestEncodeReadsBack: every field, empty or odd (quotes, control
// characters, non-UTF-8 bytes, other scripts), comes back as written, and
// the JSON is what encoding/json writes of the same record.
func TestEncodeReadsBack(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 123456789, time.UTC)
	recs := []llmapi.RequestRecord{
		{ID: "req_0193", Time: at, End: at.Add(1500 * time.Millisecond), Status: 200, LatencyMS: 1500},
		{ID: "req_x", Time: at, End: at.Add(time.Second), Node: "n1", API: "chat/completions", KeyID: "k1", Tenant: "acme/research/alpha",
			Model: "chat", Served: "chat-small", Route: "fallback", Replica: "chat-small-1a", ReplicaNode: "gpu-2", Engine: "vllm",
			Stream: true, Status: 502, Error: "upstream_unreachable", PromptTokens: 31, CompletionTokens: 20, CachedTokens: 16,
			Cost: 0.000123, LatencyMS: 812.345, TTFTMS: 95.5, Cache: "miss", Guard: `pii/input:redacted regex/output:blocked("x")`,
			Tool: "github.search", KB: "vs_a,vs_b", Bodies: true},
		{ID: "req_\"odd\\\x01\x1f", Time: at, End: at, Model: "mod\xff\xfeel", Tenant: "Ärzte/東京/проект", Guard: "tab\there\nnewline", Status: 400, LatencyMS: 0.001},
	}
	for _, want := range recs {
		raw, err := Encode(&want)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(raw) {
			t.Fatalf("not JSON: %s", raw)
		}
		var got llmapi.RequestRecord
		if err := Decode(raw, &got); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		want.Model = string([]rune(want.Model)) // invalid bytes read back as U+FFFD
		if !reflect.DeepEqual(got, want) {
			t.Errorf("read back\n%+v\nwant\n%+v\nfrom %s", got, want, raw)
		}
		s := stored{RequestRecord: want, T: want.Time.UnixNano(), E: want.End.UnixNano()}
		s.Time, s.End = time.Time{}, time.Time{}
		std, _ := json.Marshal(&s)
		var a, b any
		_ = json.Unmarshal(raw, &a)
		_ = json.Unmarshal(std, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("encoded\n%s\nencoding/json writes\n%s", raw, std)
		}
	}
}
