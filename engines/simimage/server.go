package simimage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Config is how a replica server runs.
type Config struct {
	// Model is the catalog model the replica serves; its checkpoint is
	// listed as <Model>.safetensors.
	Model string
	// StepTime is how long one sampler step takes (each a progress
	// event).
	StepTime time.Duration
	// FailStep, when above 0, fails every sampler at that step.
	FailStep int
	// Dir holds the input, output and temp folders.
	Dir string
	// Previews has each sampler step send a preview picture to the
	// prompt's client, as ComfyUI does with a --preview-method: a binary
	// WebSocket message (event 1, PREVIEW_IMAGE: a JPEG).
	Previews bool
}

// Server is a simulated ComfyUI server: it speaks ComfyUI's HTTP and
// WebSocket API and runs workflows one at a time, drawing deterministic
// pictures and meshes. It is a simulator, not image generation.
type Server struct {
	cfg     Config
	mu      sync.Mutex
	pending []*run
	running *run
	number  int
	counter int // files written
	history map[string]map[string]any
	clients map[string]*client
	wake    chan struct{}
}

// client is one WebSocket client, by its clientId.
type client struct {
	out chan wsMessage
}

// wsMessage is one message to a client: JSON text, or binary (a
// preview picture).
type wsMessage struct {
	binary bool
	b      []byte
}

// NewServer returns a server whose worker runs until ctx ends.
func NewServer(ctx context.Context, cfg Config) (*Server, error) {
	for _, d := range []string{"input", "output", "temp"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	s := &Server{cfg: cfg, history: map[string]map[string]any{}, clients: map[string]*client{}, wake: make(chan struct{}, 1)}
	go s.work(ctx)
	return s, nil
}

// ServeHTTP routes ComfyUI's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/prompt" && r.Method == http.MethodPost:
		s.postPrompt(w, r)
	case p == "/prompt" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"exec_info": map[string]any{"queue_remaining": s.remaining()}})
	case p == "/queue" && r.Method == http.MethodGet:
		s.getQueue(w)
	case p == "/queue" && r.Method == http.MethodPost:
		s.postQueue(w, r)
	case p == "/interrupt" && r.Method == http.MethodPost:
		s.interrupt(w, r)
	case p == "/history" || strings.HasPrefix(p, "/history/"):
		s.getHistory(w, strings.TrimPrefix(strings.TrimPrefix(p, "/history"), "/"))
	case p == "/view":
		s.view(w, r)
	case p == "/upload/image" && r.Method == http.MethodPost:
		s.upload(w, r)
	case p == "/object_info":
		writeJSON(w, http.StatusOK, objectInfo())
	case p == "/system_stats":
		writeJSON(w, http.StatusOK, map[string]any{
			"system":  map[string]any{"os": "posix", "comfyui_version": "simulated", "python_version": "none (llmgw simimage, a simulator)", "embedded_python": false},
			"devices": []any{map[string]any{"name": "cpu", "type": "cpu", "index": nil, "vram_total": 0, "vram_free": 0}}})
	case p == "/models":
		writeJSON(w, http.StatusOK, []string{"checkpoints"})
	case p == "/models/checkpoints":
		writeJSON(w, http.StatusOK, []string{s.cfg.Model + ".safetensors"})
	case p == "/ws":
		s.serveWS(w, r)
	default:
		http.NotFound(w, r)
	}
}

// postPrompt queues a workflow: 200 with its prompt_id, or 400 with
// ComfyUI's error and node_errors.
func (s *Server) postPrompt(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Prompt   json.RawMessage `json:"prompt"`
		ClientID string          `json:"client_id"`
		Extra    json.RawMessage `json:"extra_data"`
		Front    bool            `json:"front"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 32<<20)).Decode(&body); err != nil || len(body.Prompt) == 0 {
		writeJSON(w, http.StatusBadRequest, promptError{Error: nodeError{Type: "no_prompt", Message: "No prompt provided",
			Details: fmt.Sprint(err), ExtraInfo: map[string]any{}}, NodeErrors: []any{}})
		return
	}
	var prompt map[string]node
	if err := json.Unmarshal(body.Prompt, &prompt); err != nil {
		writeJSON(w, http.StatusBadRequest, promptError{Error: nodeError{Type: "invalid_prompt", Message: "Invalid prompt: " + err.Error(),
			ExtraInfo: map[string]any{}}, NodeErrors: []any{}})
		return
	}
	outputs, perr := validate(prompt)
	if perr != nil {
		writeJSON(w, http.StatusBadRequest, perr)
		return
	}
	ru := &run{id: newID(), prompt: prompt, outputs: outputs, client: body.ClientID, extra: body.Extra, raw: body.Prompt}
	s.mu.Lock()
	ru.number = s.number
	s.number++
	if body.Front {
		s.pending = append([]*run{ru}, s.pending...)
	} else {
		s.pending = append(s.pending, ru)
	}
	s.mu.Unlock()
	s.status()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompt_id": ru.id, "number": ru.number, "node_errors": map[string]any{}})
}

// work runs the queued prompts one at a time until ctx ends.
func (s *Server) work(ctx context.Context) {
	for {
		s.mu.Lock()
		var ru *run
		if len(s.pending) > 0 {
			ru, s.pending = s.pending[0], s.pending[1:]
			s.running = ru
		}
		s.mu.Unlock()
		if ru == nil {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
			}
			continue
		}
		s.runOne(ctx, ru)
	}
}

// runOne executes one prompt and records its history entry.
func (s *Server) runOne(ctx context.Context, ru *run) {
	rctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	ru.cancel = cancel
	s.mu.Unlock()
	defer cancel()
	now := func() int64 { return time.Now().UnixMilli() }
	msgs := [][]any{{"execution_start", map[string]any{"prompt_id": ru.id, "timestamp": now()}}}
	s.send(ru.client, "execution_start", msgs[0][1])
	outs, done, err := s.execute(rctx, ru)
	status := "success"
	var fail *nodeFailure
	switch {
	case errors.Is(err, errInterrupted):
		status = "error"
		msgs = append(msgs, []any{"execution_interrupted", map[string]any{"prompt_id": ru.id, "node_id": lastOf(done), "executed": done, "timestamp": now()}})
	case errors.As(err, &fail):
		status = "error"
		msgs = append(msgs, []any{"execution_error", map[string]any{"prompt_id": ru.id, "node_id": fail.node, "node_type": fail.class,
			"executed": done, "exception_message": fail.err.Error(), "exception_type": "RuntimeError", "traceback": []string{}, "timestamp": now()}})
	default:
		msgs = append(msgs, []any{"execution_success", map[string]any{"prompt_id": ru.id, "timestamp": now()}})
	}
	s.mu.Lock()
	s.history[ru.id] = map[string]any{
		"prompt":  []any{ru.number, ru.id, ru.raw, ru.extra, ru.outputs},
		"outputs": outs,
		"status":  map[string]any{"status_str": status, "completed": status == "success", "messages": msgs},
		"meta":    map[string]any{},
	}
	s.running = nil
	s.mu.Unlock()
	last := msgs[len(msgs)-1]
	s.send(ru.client, last[0].(string), last[1])
	if status == "success" {
		s.send(ru.client, "executing", map[string]any{"node": nil, "prompt_id": ru.id})
	}
	s.status()
}

func lastOf(s []string) any {
	if len(s) == 0 {
		return nil
	}
	return s[len(s)-1]
}

// queueEntry is a prompt as /queue lists it.
func queueEntry(ru *run) []any { return []any{ru.number, ru.id, ru.raw, ru.extra, ru.outputs} }

func (s *Server) getQueue(w http.ResponseWriter) {
	s.mu.Lock()
	running, pending := []any{}, []any{}
	if s.running != nil {
		running = append(running, queueEntry(s.running))
	}
	for _, ru := range s.pending {
		pending = append(pending, queueEntry(ru))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"queue_running": running, "queue_pending": pending})
}

// postQueue clears the pending prompts or deletes some of them.
func (s *Server) postQueue(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Clear  bool     `json:"clear"`
		Delete []string `json:"delete"`
	}
	_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body)
	s.mu.Lock()
	keep := s.pending[:0:0]
	for _, ru := range s.pending {
		if !body.Clear && !slices.Contains(body.Delete, ru.id) {
			keep = append(keep, ru)
		}
	}
	s.pending = keep
	s.mu.Unlock()
	s.status()
	w.WriteHeader(http.StatusOK)
}

// interrupt stops the running prompt (the one named, when a body names
// one and it runs).
func (s *Server) interrupt(w http.ResponseWriter, r *http.Request) {
	var body struct {
		PromptID string `json:"prompt_id"`
	}
	_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body)
	s.mu.Lock()
	if ru := s.running; ru != nil && ru.cancel != nil && (body.PromptID == "" || body.PromptID == ru.id) {
		ru.cancel()
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *Server) getHistory(w http.ResponseWriter, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		writeJSON(w, http.StatusOK, s.history)
		return
	}
	out := map[string]any{}
	if h, ok := s.history[id]; ok {
		out[id] = h
	}
	writeJSON(w, http.StatusOK, out)
}

// view serves a file of the input, output or temp folder.
func (s *Server) view(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	typ := q.Get("type")
	if typ == "" {
		typ = "output"
	}
	name, sub := q.Get("filename"), q.Get("subfolder")
	if (typ != "output" && typ != "input" && typ != "temp") || name == "" || strings.Contains(name+"/"+sub, "..") || filepath.IsAbs(sub) {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	path := filepath.Join(s.cfg.Dir, typ, filepath.FromSlash(sub), filepath.Base(name))
	b, err := os.ReadFile(path)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ct := mime.TypeByExtension(filepath.Ext(name))
	if filepath.Ext(name) == ".glb" {
		ct = "model/gltf-binary"
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", fmt.Sprintf("filename=%q", filepath.Base(name)))
	_, _ = w.Write(b)
}

// upload stores a picture in the input folder (multipart field image).
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<20)
	f, hdr, err := r.FormFile("image")
	if err != nil {
		http.Error(w, "no image in the form: "+err.Error(), http.StatusBadRequest)
		return
	}
	defer f.Close()
	name := filepath.Base(hdr.Filename)
	if name == "." || name == "/" || strings.Contains(name, "..") {
		http.Error(w, "bad file name", http.StatusBadRequest)
		return
	}
	dst, err := os.Create(filepath.Join(s.cfg.Dir, "input", name))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, err = io.Copy(dst, f)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "subfolder": "", "type": "input"})
}

// serveWS sends the client its prompts' events, and the queue's status
// to everyone, as ComfyUI's /ws does.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	id := r.URL.Query().Get("clientId")
	if id == "" {
		id = newID()
	}
	c := &client{out: make(chan wsMessage, 4096)}
	s.mu.Lock()
	s.clients[id] = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.clients[id] == c {
			delete(s.clients, id)
		}
		s.mu.Unlock()
	}()
	ctx := conn.CloseRead(r.Context())
	first, _ := json.Marshal(map[string]any{"type": "status", "data": map[string]any{
		"status": map[string]any{"exec_info": map[string]any{"queue_remaining": s.remaining()}}, "sid": id}})
	if conn.Write(ctx, websocket.MessageText, first) != nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-c.out:
			typ := websocket.MessageText
			if m.binary {
				typ = websocket.MessageBinary
			}
			if conn.Write(ctx, typ, m.b) != nil {
				return
			}
		}
	}
}

// send gives one event to the prompt's client ("" or gone: to nobody).
func (s *Server) send(clientID, typ string, data any) {
	if clientID == "" {
		return
	}
	b, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	s.deliver(clientID, wsMessage{b: b})
}

// deliver gives one message to a client ("" or gone: to nobody).
func (s *Server) deliver(clientID string, m wsMessage) {
	if clientID == "" {
		return
	}
	s.mu.Lock()
	c := s.clients[clientID]
	s.mu.Unlock()
	if c == nil {
		return
	}
	select {
	case c.out <- m:
	default: // a client that does not read loses events, as with ComfyUI
	}
}

// status tells every client how many prompts remain.
func (s *Server) status() {
	b, _ := json.Marshal(map[string]any{"type": "status", "data": map[string]any{
		"status": map[string]any{"exec_info": map[string]any{"queue_remaining": s.remaining()}}}})
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.clients {
		select {
		case c.out <- wsMessage{b: b}:
		default:
		}
	}
}

func (s *Server) remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.pending)
	if s.running != nil {
		n++
	}
	return n
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
