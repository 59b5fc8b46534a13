package llmcache

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/llmgw/modules/openai"
)

// A miss's reasoning, logprobs, stop_reason and reasoning tokens are
// kept, and a hit replays them, whole and streamed.
func TestAnswerDetailsRoundTrip(t *testing.T) {
	chatLP := `{"content":[{"token":"Hi","logprob":-0.1,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.1,"bytes":[72,105]}]},` +
		`{"token":" there","logprob":-0.7,"bytes":[32,116,104,101,114,101],"top_logprobs":[{"token":" there","logprob":-0.7,"bytes":[32,116,104,101,114,101]}]}],"refusal":null}`
	textLP := `{"tokens":["Hi"," there"],"token_logprobs":[-0.1,-0.7],"top_logprobs":[{"Hi":-0.1},{" there":-0.7}],"text_offset":[0,2]}`
	for _, a := range []*answer{
		{Chat: true, Model: "m", Usage: openai.Usage{PromptTokens: 5, CompletionTokens: 9}, ReasoningTokens: 7,
			Choices: []answerChoice{{Content: "Hi there", FinishReason: "stop", Reasoning: "let me think it over",
				Logprobs: json.RawMessage(chatLP), StopReason: json.RawMessage(`"END"`)}}},
		{Model: "m", Usage: openai.Usage{PromptTokens: 5, CompletionTokens: 2},
			Choices: []answerChoice{{Content: "Hi there", FinishReason: "stop", Logprobs: json.RawMessage(textLP), StopReason: json.RawMessage(`128001`)}}},
	} {
		// Kept in the store's compact form, and read back from it.
		var w blobWriter
		appendAnswer(&w, a)
		if got := readAnswer(&blobReader{s: string(w.b)}); !cmp.Equal(a, got, ignoreInline, jsonValues) {
			t.Errorf("the store's form loses some: %s", cmp.Diff(a, got, ignoreInline, jsonValues))
		}
		rec := httptest.NewRecorder()
		a.writeStream(rec, "m", true)
		got, err := assemble(rec.Body.Bytes(), a.Usage)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, got, ignoreInline, jsonValues); diff != "" {
			t.Errorf("replayed stream assembles differently (-want +got)\n%s\n%s", diff, rec.Body.String())
		}
		rec = httptest.NewRecorder()
		a.writeWhole(rec, "m")
		whole, err := parseWhole(rec.Body.Bytes(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a.Choices, whole.Choices, jsonValues); diff != "" || whole.ReasoningTokens != a.ReasoningTokens {
			t.Errorf("whole answer differs (-want +got)\n%s\nreasoning tokens %d, want %d", diff, whole.ReasoningTokens, a.ReasoningTokens)
		}
	}
}

// jsonValues compares raw JSON by value.
var jsonValues = cmp.Comparer(func(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && cmp.Equal(x, y)
})
