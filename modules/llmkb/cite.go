package llmkb

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

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

// chatCitations turns a citer's annotations into a chat answer's.
func chatCitations(c *openai.Citer) []citation {
	out := make([]citation, 0, c.Len())
	for k, ct := range c.Citations() {
		r := c.Result(k)
		out = append(out, citation{Type: "file_citation", FileCitation: fileCitation{FileID: r.FileID, Filename: r.Filename, Index: int(ct.Index)}})
	}
	return out
}

// citationWriter adds citations to a chat completion: to each choice's
// message of a whole answer, and as a last chunk (delta.annotations)
// before a stream's [DONE].
type citationWriter struct {
	http.ResponseWriter
	rt      *openai.Retrieval
	status  int
	stream  bool
	held    bytes.Buffer  // a whole answer; or a stream's unfinished event
	cite    *openai.Citer // the first choice's text of a stream
	id      string
	model   string
	created int64
}

func newCitationWriter(w http.ResponseWriter, rt *openai.Retrieval) *citationWriter {
	return &citationWriter{ResponseWriter: w, rt: rt, cite: openai.NewCiter(rt)}
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
				if c.Index == 0 && cw.cite != nil {
					cw.cite.Feed(c.Delta.Content)
				}
			}
		}
	}
	_, err := cw.ResponseWriter.Write(ev)
	return err
}

// writeCitationChunk writes the stream's citations as one chunk.
func (cw *citationWriter) writeCitationChunk() error {
	if cw.cite == nil {
		return nil
	}
	if cw.cite.Finish(); cw.cite.Len() == 0 {
		return nil
	}
	cites := chatCitations(cw.cite)
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
		c := openai.NewCiter(cw.rt)
		if c == nil {
			return
		}
		c.Feed(text)
		if c.Finish(); c.Len() > 0 {
			msg["annotations"] = chatCitations(c)
		}
	}
}
