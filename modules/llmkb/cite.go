package llmkb

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/llmgw/llmgw/modules/openai"
)

// citation is a chat answer's file_citation annotation (llmgw's, in the
// shape of OpenAI's url_citation): the file a passage the answer cites
// came from, and where in the answer's text (in characters) it is cited.
type citation struct {
	Type         string       `json:"type"`
	FileCitation fileCitation `json:"file_citation"`
}

type fileCitation struct {
	FileID   string `json:"file_id"`
	Filename string `json:"filename"`
	Index    int    `json:"index"`
}

// citations finds the passages text cites: each marker [n] (or [n, m],
// or 【n】) of a passage given gives an annotation just after it. An
// answer with no marker cites the files of the passages it was given (the
// first three), at its end.
func citations(text string, rt *openai.Retrieval) []citation {
	var out []citation
	for i := 0; i < len(text); i++ {
		open, close := markerAt(text, i)
		if open == 0 {
			continue
		}
		end := strings.Index(text[i+open:], close)
		if end < 0 || end > 16 {
			continue
		}
		inner, after := text[i+open:i+open+end], i+open+end+len(close)
		for _, f := range strings.Split(inner, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > len(rt.Results) {
				continue
			}
			res := rt.Results[n-1]
			out = append(out, citation{Type: "file_citation", FileCitation: fileCitation{FileID: res.FileID, Filename: res.Filename, Index: utf8.RuneCountInString(text[:after])}})
		}
	}
	if len(out) > 0 || len(rt.Results) == 0 {
		return out
	}
	seen := map[string]bool{}
	end := utf8.RuneCountInString(text)
	for _, res := range rt.Results {
		if !seen[res.FileID] && len(seen) < 3 {
			seen[res.FileID] = true
			out = append(out, citation{Type: "file_citation", FileCitation: fileCitation{FileID: res.FileID, Filename: res.Filename, Index: end}})
		}
	}
	return out
}

// markerAt returns the lengths of the marker opening at i and its
// closing, or 0.
func markerAt(text string, i int) (int, string) {
	switch {
	case text[i] == '[':
		return 1, "]"
	case strings.HasPrefix(text[i:], "【"):
		return len("【"), "】"
	}
	return 0, ""
}

// citationWriter adds citations to a chat completion: to each choice's
// message of a whole answer, and as a last chunk (delta.annotations)
// before a stream's [DONE].
type citationWriter struct {
	http.ResponseWriter
	rt      *openai.Retrieval
	status  int
	stream  bool
	held    bytes.Buffer // a whole answer; or a stream's unfinished event
	text    strings.Builder
	id      string
	model   string
	created int64
}

func newCitationWriter(w http.ResponseWriter, rt *openai.Retrieval) *citationWriter {
	return &citationWriter{ResponseWriter: w, rt: rt}
}

// Unwrap gives http.ResponseController the writer underneath.
func (cw *citationWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }

func (cw *citationWriter) WriteHeader(code int) {
	if cw.status != 0 {
		return
	}
	cw.status = code
	cw.stream = strings.HasPrefix(cw.Header().Get("Content-Type"), "text/event-stream")
	if code != http.StatusOK || cw.stream {
		cw.ResponseWriter.WriteHeader(code)
		return
	}
	cw.Header().Del("Content-Length") // the answer grows by its citations
}

func (cw *citationWriter) Write(p []byte) (int, error) {
	if cw.status == 0 {
		cw.WriteHeader(http.StatusOK)
	}
	switch {
	case cw.status != http.StatusOK:
		return cw.ResponseWriter.Write(p)
	case !cw.stream:
		return cw.held.Write(p)
	}
	cw.held.Write(p)
	for {
		b := cw.held.Bytes()
		end := bytes.Index(b, []byte("\n\n"))
		if end < 0 {
			return len(p), nil
		}
		if err := cw.event(b[:end+2]); err != nil {
			return len(p), err
		}
		cw.held.Next(end + 2)
	}
}

// Flush passes a stream's flushes on.
func (cw *citationWriter) Flush() { _ = http.NewResponseController(cw.ResponseWriter).Flush() }

// event passes one SSE event on, reading its text; before [DONE] it
// writes the citations' chunk.
func (cw *citationWriter) event(ev []byte) error {
	data, ok := bytes.CutPrefix(bytes.TrimSpace(ev), []byte("data:"))
	data = bytes.TrimSpace(data)
	if ok && string(data) == "[DONE]" {
		if err := cw.writeCitationChunk(); err != nil {
			return err
		}
	} else if ok {
		var chunk struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Created int64  `json:"created"`
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(data, &chunk) == nil {
			cw.id, cw.model, cw.created = chunk.ID, chunk.Model, chunk.Created
			for _, c := range chunk.Choices {
				if c.Index == 0 {
					cw.text.WriteString(c.Delta.Content)
				}
			}
		}
	}
	_, err := cw.ResponseWriter.Write(ev)
	return err
}

// writeCitationChunk writes the stream's citations as one chunk.
func (cw *citationWriter) writeCitationChunk() error {
	cites := citations(cw.text.String(), cw.rt)
	if len(cites) == 0 {
		return nil
	}
	chunk := map[string]any{"id": cw.id, "object": "chat.completion.chunk", "created": cw.created, "model": cw.model,
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"annotations": cites}, "finish_reason": nil}}}
	b, _ := json.Marshal(chunk)
	_, err := cw.ResponseWriter.Write(append(append([]byte("data: "), b...), "\n\n"...))
	return err
}

// finish writes a whole answer with its citations (or a stream's last
// unfinished bytes) once the handlers after are done.
func (cw *citationWriter) finish() {
	if cw.status != http.StatusOK || cw.stream {
		if cw.held.Len() > 0 {
			_, _ = cw.ResponseWriter.Write(cw.held.Bytes())
		}
		return
	}
	body := cw.held.Bytes()
	var answer map[string]any
	if json.Unmarshal(body, &answer) == nil {
		cw.annotate(answer)
		if b, err := json.Marshal(answer); err == nil {
			body = b
		}
	}
	cw.Header().Set("Content-Length", strconv.Itoa(len(body)))
	cw.ResponseWriter.WriteHeader(cw.status)
	_, _ = cw.ResponseWriter.Write(body)
}

// annotate adds citations to each choice's message of a whole answer.
func (cw *citationWriter) annotate(answer map[string]any) {
	choices, _ := answer["choices"].([]any)
	for _, c := range choices {
		choice, _ := c.(map[string]any)
		msg, _ := choice["message"].(map[string]any)
		if msg == nil {
			continue
		}
		text, _ := msg["content"].(string)
		if cites := citations(text, cw.rt); len(cites) > 0 {
			msg["annotations"] = cites
		}
	}
}
