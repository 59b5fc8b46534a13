package llmguard

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/openai"
)

// maxJobPart bounds a text part of a multipart job the checks read.
const maxJobPart = 16 << 20

// serveMultipartJob is serveJob for a multipart/form-data body (a job
// with input files, an image edit): the body is kept (in memory, or in a
// temporary file when it is large) while the checks read its text part,
// then handed on, with that part rewritten when a value was redacted.
func (g *Guardrails) serveMultipartJob(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, field, boundary string) error {
	in := new(spool)
	defer in.close()
	_, err := io.Copy(in, r.Body)
	r.Body.Close()
	if err != nil {
		(&openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_request",
			Message: "reading the multipart body: " + err.Error()}).WriteFor(w, r)
		return nil
	}
	rd, err := in.reader()
	if err != nil {
		return err
	}
	body, ok := readMultipartJob(rd, boundary, field)
	if rd, err = in.reader(); err != nil {
		return err
	}
	setBody(r, rd, in.n)
	if !ok {
		return next.ServeHTTP(w, r) // no text part: llm_jobs says what is wrong
	}
	st, blocked, changed := g.checkJob(w, r, body, field)
	defer st.finish(r)
	out := new(spool)
	defer out.close()
	if blocked == nil && len(changed) > 0 {
		blocked = g.rewritePart(r, in, out, boundary, body, changed)
	}
	if blocked != nil {
		blocked.WriteFor(w, r)
		return nil
	}
	return next.ServeHTTP(w, r)
}

// readMultipartJob finds the texts of a multipart body: the job in the
// part named request (or job) of POST /v1/jobs, the prompt field of an
// edit.
func readMultipartJob(rd io.Reader, boundary, field string) (*jobBody, bool) {
	mr := multipart.NewReader(rd, boundary)
	for {
		part, err := mr.NextPart()
		if err != nil {
			return nil, false
		}
		name := part.FormName()
		if part.FileName() != "" || (field == "workflow" && name != "request" && name != "job") || (field == "prompt" && name != "prompt") {
			continue
		}
		raw, err := io.ReadAll(io.LimitReader(part, maxJobPart))
		if err != nil {
			return nil, false
		}
		if field == "prompt" {
			return &jobBody{texts: []string{string(raw)}, at: [][2]string{{"", ""}}, part: name}, true
		}
		b, ok := readJobBody(raw, field)
		if ok {
			b.part = name
		}
		return b, ok
	}
}

// rewritePart writes the body again into out with the text part
// redacted, and hands it on.
func (g *Guardrails) rewritePart(r *http.Request, in, out *spool, boundary string, b *jobBody, changed map[int]string) *openai.Error {
	content := []byte(changed[0])
	if b.top != nil {
		var err error
		if content, err = b.set(changed); err != nil {
			return g.redactFailed(err)
		}
	}
	rd, err := in.reader()
	if err != nil {
		return g.redactFailed(err)
	}
	mr, mw := multipart.NewReader(rd, boundary), multipart.NewWriter(out)
	if err := mw.SetBoundary(boundary); err != nil {
		return g.redactFailed(err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		} else if err != nil {
			return g.redactFailed(err)
		}
		pw, err := mw.CreatePart(part.Header)
		if err == nil && part.FileName() == "" && part.FormName() == b.part {
			_, err = io.Copy(pw, bytes.NewReader(content))
			b.part = "" // only the first such part was read
		} else if err == nil {
			_, err = io.Copy(pw, part)
		}
		if err != nil {
			return g.redactFailed(err)
		}
	}
	if err := mw.Close(); err != nil {
		return g.redactFailed(err)
	}
	rd, err = out.reader()
	if err != nil {
		return g.redactFailed(err)
	}
	setBody(r, rd, out.n)
	return nil
}
