package responsesapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgw/llmgw/modules/openai"
)

// testRetrieval is what a knowledge base found: five passages of four
// files, the first file twice.
func testRetrieval() *openai.Retrieval {
	return &openai.Retrieval{CallID: "fs_test1", Queries: []string{"how to reset", "password reset"}, Status: "completed",
		Results: []openai.RetrievalResult{
			{FileID: "file-a", Filename: "a.md", Score: 0.91, Text: "Reset it under Settings.", Attributes: map[string]any{"lang": "en"}},
			{FileID: "file-b", Filename: "b \"quoted\".pdf", Score: 0.8, Text: "Ask your admin."},
			{FileID: "file-a", Filename: "a.md", Score: 0.7, Text: "Passwords expire after 90 days."},
			{FileID: "file-c", Filename: "c.txt", Score: 0.6, Text: "c"},
			{FileID: "file-d", Filename: "d.txt", Score: 0.5, Text: "d"},
		}}
}

// citation is a file_citation annotation as the client reads it.
type citation struct {
	FileID, Filename string
	Index            int64
}

var markerRE = regexp.MustCompile(`\[(\d+(?:, *\d+)*)\]|【(\d+)】`)

// wantCitations is the citation rule written out plainly: each passage
// number of each marker, at the code point offset after the marker; with
// no marker, the first three files at the end.
func wantCitations(text string, rv *openai.Retrieval) []citation {
	var out []citation
	for _, m := range markerRE.FindAllStringSubmatchIndex(text, -1) {
		var list string
		if m[2] >= 0 {
			list = text[m[2]:m[3]]
		} else {
			list = text[m[4]:m[5]]
		}
		var seen []int
		for _, s := range strings.Split(list, ",") {
			n, _ := strconv.Atoi(strings.TrimSpace(s))
			if n < 1 || n > len(rv.Results) || slices.Contains(seen, n) {
				continue
			}
			seen = append(seen, n)
			r := rv.Results[n-1]
			out = append(out, citation{r.FileID, r.Filename, int64(utf8.RuneCountInString(text[:m[1]]))})
		}
	}
	if len(out) > 0 || text == "" {
		return out
	}
	var files []string
	for _, r := range rv.Results {
		if !slices.Contains(files, r.FileID) && len(files) < 3 {
			files = append(files, r.FileID)
			out = append(out, citation{r.FileID, r.Filename, int64(utf8.RuneCountInString(text))})
		}
	}
	return out
}

var citeTexts = []string{
	"Grüße 👋 [1] and [2, 3]. Also 【1】, [9], [0], [] and [x]. Done[4][[5]",
	"Nothing cited here, 世界 👋 — \"quoted\"\n",
	"line\n\"q\" [5,4 ,3] 😀😀[2]",
}

// asciiJSON encodes s as a JSON string with every non-ASCII character
// escaped (\u00fc, astral ones as surrogate pairs), as some engines write.
func asciiJSON(s string) string {
	q, _ := json.Marshal(s)
	var b strings.Builder
	for _, r := range string(q) {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

func searchedTurn(t testing.TB, body string, rv *openai.Retrieval) *respTurn {
	t.Helper()
	turn := newTurn(t, body)
	turn.req.Retrieval = rv
	return turn
}

// TestFileSearchWhole checks a whole answer after a search, read with
// openai-go: the file_search_call item first (results only when
// included), the message's citations by the rule, whether the engine
// wrote its text in UTF-8 or escaped.
func TestFileSearchWhole(t *testing.T) {
	rv := testRetrieval()
	for _, include := range []bool{false, true} {
		for _, text := range citeTexts {
			for _, escaped := range []bool{false, true} {
				name := fmt.Sprintf("include %v, escaped %v, %.12q", include, escaped, text)
				body := `{"model":"m","input":"q","store":false,"tools":[{"type":"file_search","vector_store_ids":["kb"]}]`
				if include {
					body += `,"include":["file_search_call.results"]`
				}
				turn := searchedTurn(t, body+"}", rv)
				content, _ := json.Marshal(text)
				if escaped {
					content = []byte(asciiJSON(text))
				}
				chat := `{"choices":[{"index":0,"message":{"role":"assistant","content":` + string(content) + `},"finish_reason":"stop"}]}`
				rec := serve(turn, 200, "application/json", [][]byte{[]byte(chat)}, nil)
				var resp responses.Response
				if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
					t.Fatalf("%s: openai-go: %v\n%s", name, err, rec.Body)
				}
				checkSearchedResponse(t, name, &resp, text, rv, include)
			}
		}
	}
}

// checkSearchedResponse checks a response object after a search.
func checkSearchedResponse(t testing.TB, name string, resp *responses.Response, text string, rv *openai.Retrieval, include bool) {
	t.Helper()
	if len(resp.Output) != 2 || resp.Output[0].Type != "file_search_call" || resp.Output[1].Type != "message" {
		t.Fatalf("%s: got output %s", name, resp.RawJSON())
	}
	fs := resp.Output[0].AsFileSearchCall()
	if fs.ID != rv.CallID || fs.Status != "completed" || !slices.Equal(fs.Queries, rv.Queries) {
		t.Fatalf("%s: got file_search_call %s", name, fs.RawJSON())
	}
	if !include {
		if fs.Results != nil || !strings.Contains(fs.RawJSON(), `"results":null`) {
			t.Fatalf("%s: results without include: %s", name, fs.RawJSON())
		}
	} else {
		if len(fs.Results) != len(rv.Results) {
			t.Fatalf("%s: got results %s", name, fs.RawJSON())
		}
		for i, r := range fs.Results {
			w := rv.Results[i]
			if r.FileID != w.FileID || r.Filename != w.Filename || r.Score != w.Score || r.Text != w.Text ||
				len(r.Attributes) != len(w.Attributes) || w.Attributes != nil && r.Attributes["lang"].OfString != "en" {
				t.Fatalf("%s: result %d: got %s, want %+v", name, i, r.RawJSON(), w)
			}
		}
	}
	msg := resp.Output[1].AsMessage()
	if resp.OutputText() != text || len(msg.Content) != 1 {
		t.Fatalf("%s: got text %q, want %q", name, resp.OutputText(), text)
	}
	var got []citation
	for _, a := range msg.Content[0].Annotations {
		c := a.AsFileCitation()
		if a.Type != "file_citation" || c.Type != "file_citation" {
			t.Fatalf("%s: annotation %s", name, a.RawJSON())
		}
		got = append(got, citation{c.FileID, c.Filename, c.Index})
	}
	if diff := cmp.Diff(wantCitations(text, rv), got); diff != "" {
		t.Fatalf("%s: annotations (-want +got)\n%s", name, diff)
	}
}

// TestFileSearchStream checks a streamed answer after a search, its text
// cut into deltas of 1 to 8 characters (so markers split across them)
// and the stream into arbitrary pieces: the file_search_call item's
// events first, each annotation as soon as the delta that completes its
// marker, the no-marker ones before output_text.done, and all of them in
// the part, the item and the final response.
func TestFileSearchStream(t *testing.T) {
	rv := testRetrieval()
	for n, text := range citeTexts {
		want := wantCitations(text, rv)
		for seed := range uint64(60) {
			rng := rand.New(rand.NewPCG(uint64(n), seed))
			a := chatAnswer{content: text, finish: "stop", usage: `{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}`}
			include := seed%2 == 1
			body := `{"model":"m","input":"q","stream":true,"store":false,"tools":[{"type":"file_search","vector_store_ids":["kb"]}]`
			if include {
				body += `,"include":["file_search_call.results"]`
			}
			turn := searchedTurn(t, body+"}", rv)
			rec := serve(turn, 200, "text/event-stream", chunks(rng, a.stream(rng)), rng)
			evs := readRespEvents(t, rec.Body.Bytes())
			c := checkEvents(t, evs)
			checkSearchEvents(t, evs, c, text, want)
			var final responses.Response
			raw, _ := json.Marshal(c.final)
			if err := json.Unmarshal(raw, &final); err != nil {
				t.Fatal(err)
			}
			checkSearchedResponse(t, fmt.Sprintf("text %d, seed %d", n, seed), &final, text, rv, include)
			checkOfficialSearchStream(t, rec.Body.Bytes(), text, want)
		}
	}
}

// checkSearchEvents checks the order of a searched stream's events.
func checkSearchEvents(t testing.TB, evs []respEvent, c checked, text string, want []citation) {
	t.Helper()
	wantNames := []string{"response.created", "response.in_progress", "response.output_item.added", "response.file_search_call.in_progress",
		"response.file_search_call.searching", "response.file_search_call.completed", "response.output_item.done", "response.output_item.added"}
	if got := names(evs[:len(wantNames)]); !slices.Equal(got, wantNames) {
		t.Fatalf("got events %v, want %v", got, wantNames)
	}
	if item := evs[2].data["item"].(map[string]any); item["type"] != "file_search_call" || item["status"] != "in_progress" ||
		evs[2].data["output_index"] != float64(0) || evs[3].data["item_id"] != "fs_test1" || evs[7].data["output_index"] != float64(1) {
		t.Fatalf("got %s, %s, %s", evs[2].raw, evs[3].raw, evs[7].raw)
	}
	if c.text != text || len(c.annots) != len(want) {
		t.Fatalf("got text %q and %d annotations, want %q and %d", c.text, len(c.annots), text, len(want))
	}
	marked := markerRE.MatchString(text)
	for k, w := range want {
		a := c.annots[k]
		if a["type"] != "file_citation" || a["file_id"] != w.FileID || a["filename"] != w.Filename || a["index"] != float64(w.Index) {
			t.Fatalf("annotation %d: got %v, want %+v", k, a, w)
		}
		seen := int64(utf8.RuneCountInString(c.textAt[k]))
		if marked && (seen < w.Index || seen-8 >= w.Index) || !marked && c.textAt[k] != text {
			t.Fatalf("annotation %d at %d came when the deltas had given %q", k, w.Index, c.textAt[k])
		}
	}
	done := slices.IndexFunc(evs, func(e respEvent) bool { return e.name == "response.output_text.done" })
	if !marked {
		for _, ev := range evs[done-len(want) : done] {
			if ev.name != "response.output_text.annotation.added" {
				t.Fatalf("the no-marker annotations do not come right before output_text.done: %s", ev.raw)
			}
		}
	}
	var part, item map[string]any
	for _, ev := range evs {
		switch {
		case ev.name == "response.content_part.done":
			part = ev.data["part"].(map[string]any)
		case ev.name == "response.output_item.done" && ev.data["output_index"] == float64(1):
			item = ev.data["item"].(map[string]any)
		}
	}
	content := item["content"].([]any)[0]
	if fmt.Sprint(part["annotations"]) != fmt.Sprint(c.annots) || fmt.Sprint(content.(map[string]any)["annotations"]) != fmt.Sprint(c.annots) {
		t.Fatalf("done events' annotations: part %v, item %v; the added events gave %v", part["annotations"], content, c.annots)
	}
}

// checkOfficialSearchStream reads a searched stream with openai-go's
// event types.
func checkOfficialSearchStream(t testing.TB, body []byte, text string, want []citation) {
	t.Helper()
	res := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(body))}
	stream := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(res), nil)
	var got []citation
	var search []string
	var final responses.Response
	for stream.Next() {
		switch v := stream.Current().AsAny().(type) {
		case responses.ResponseFileSearchCallInProgressEvent:
			search = append(search, v.ItemID+" in_progress "+strconv.FormatInt(v.OutputIndex, 10))
		case responses.ResponseFileSearchCallSearchingEvent:
			search = append(search, v.ItemID+" searching "+strconv.FormatInt(v.OutputIndex, 10))
		case responses.ResponseFileSearchCallCompletedEvent:
			search = append(search, v.ItemID+" completed "+strconv.FormatInt(v.OutputIndex, 10))
		case responses.ResponseOutputTextAnnotationAddedEvent:
			c := v.Annotation.AsFileCitation()
			if v.OutputIndex != 1 || v.AnnotationIndex != int64(len(got)) || c.Type != "file_citation" {
				t.Fatalf("openai-go read %s", v.RawJSON())
			}
			got = append(got, citation{c.FileID, c.Filename, c.Index})
		case responses.ResponseCompletedEvent:
			final = v.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("openai-go: %v", err)
	}
	if !slices.Equal(search, []string{"fs_test1 in_progress 0", "fs_test1 searching 0", "fs_test1 completed 0"}) {
		t.Fatalf("openai-go read the search events %q", search)
	}
	if diff := cmp.Diff(want, got); diff != "" || final.OutputText() != text || final.Output[0].AsFileSearchCall().ID != "fs_test1" {
		t.Fatalf("openai-go read annotations (-want +got)\n%s\ntext %q", diff, final.OutputText())
	}
}

// TestFileSearchStored checks that a stored response keeps the
// file_search_call item and the citations (GET /v1/responses/{id}), and
// that the next turn continues with the answer, markers and all, but
// without the passages.
func TestFileSearchStored(t *testing.T) {
	SetResponseStore(newMemoryStore(10, 1<<20))
	defer SetResponseStore(nil)
	rv := testRetrieval()
	text := citeTexts[0]
	for _, stream := range []bool{false, true} {
		turn := searchedTurn(t, fmt.Sprintf(`{"model":"m","input":"how?","stream":%v,"tools":[{"type":"file_search","vector_store_ids":["kb"]}]}`, stream), rv)
		a := chatAnswer{content: text, finish: "stop", usage: `{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}`}
		if stream {
			serve(turn, 200, "text/event-stream", [][]byte{a.stream(rand.New(rand.NewPCG(7, 8)))}, nil)
		} else {
			serve(turn, 200, "application/json", [][]byte{a.whole()}, nil)
		}
		rec := httptest.NewRecorder()
		ServeStoredResponse(rec, httptest.NewRequest(http.MethodGet, "/v1/responses/"+turn.id, nil), turn.id)
		var resp responses.Response
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); rec.Code != 200 || err != nil {
			t.Fatalf("GET: %d %v %s", rec.Code, err, rec.Body)
		}
		checkSearchedResponse(t, fmt.Sprintf("stored, stream %v", stream), &resp, text, rv, false)

		next, err := responsesRequest(t, `{"model":"m","previous_response_id":"`+turn.id+`","input":"and then?"}`)
		if err != nil {
			t.Fatal(err)
		}
		q, _ := json.Marshal(text)
		want := `{"model":"m","messages":[{"role":"user","content":"how?"},{"role":"assistant","content":` + string(q) + `},{"role":"user","content":"and then?"}]}`
		if diff := cmp.Diff(jsonValue(t, []byte(want)), jsonValue(t, next.Raw)); diff != "" {
			t.Fatalf("next turn (-want +got)\n%s", diff)
		}
	}
}

// TestFileSearchFailed checks a search that failed: its item says so,
// without a completed event, and the answer cites nothing.
func TestFileSearchFailed(t *testing.T) {
	rv := &openai.Retrieval{CallID: "fs_f", Queries: []string{"q"}, Status: "failed"}
	turn := searchedTurn(t, `{"model":"m","input":"q","stream":true,"store":false,"tools":[{"type":"file_search","vector_store_ids":["kb"]}]}`, rv)
	a := chatAnswer{content: "I found nothing [1].", finish: "stop", usage: `{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}`}
	rec := serve(turn, 200, "text/event-stream", [][]byte{a.stream(rand.New(rand.NewPCG(1, 1)))}, nil)
	evs := readRespEvents(t, rec.Body.Bytes())
	c := checkEvents(t, evs)
	out := c.final["output"].([]any)
	if !slices.Equal(c.search, []string{"response.file_search_call.in_progress", "response.file_search_call.searching"}) ||
		out[0].(map[string]any)["status"] != "failed" || len(c.annots) != 0 || c.text != a.content {
		t.Fatalf("got search events %v, output %v, annotations %v", c.search, out, c.annots)
	}
}
