package sim

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/llmgw/llmgw/engines/internal/proc"
	"github.com/llmgw/llmgw/engines/sim/prefixcache"
)

// ServerConfig configures one simulated replica server.
type ServerConfig struct {
	Model string
	// ContextLength is the replica's context window, as the gateway gave
	// it; reported in /v1/models (max_model_len) and in the
	// X-Sim-Context-Length header of answers, so tests see it served.
	ContextLength   int64
	TTFT            time.Duration
	TokensPerSecond float64
	MaxTokens       int
	EmbeddingDims   int
	// EmbeddingDelay is how long each /v1/embeddings call takes before
	// it answers (a call given up by its client ends at once).
	EmbeddingDelay time.Duration
	FailStatus     int
	// Echo answers with the last message's text (the prompt for
	// completions) cut into 3-byte pieces, one per token.
	Echo bool
	// Reasoning makes every chat answer start with reasoning_content, as
	// a reasoning model's do, when the request sets no reasoning_effort.
	Reasoning bool
	// PrefixCacheTokens, when set, simulates a prefix cache of that many
	// tokens (see engines/sim/prefixcache): usage reports the cached
	// prompt tokens, and PrefillTokensPerSecond makes the uncached ones
	// cost time before the first token.
	PrefixCacheTokens      int
	PrefillTokensPerSecond float64
	// Weights is the path the gateway gave as the replica's weights (a
	// file or a directory). The sim loads nothing from it, but reads it
	// at start and reports a sha256 of its contents in the X-Sim-Weights
	// header of answers, so tests see which files a replica runs on.
	Weights string
	// VisibleDevices is the replica process's CUDA_VISIBLE_DEVICES (the
	// GPU devices the gateway gave it), reported in /v1/models
	// (visible_devices) and in the X-Sim-Visible-Devices header of
	// answers, so tests see which devices a replica was given.
	VisibleDevices string
}

// Server is the simulated model's HTTP server.
type Server struct {
	cfg ServerConfig
	// Counters, served at GET /sim/stats for tests and demos.
	requests, inflight, canceled, completed atomic.Int64
	last                                    atomic.Pointer[[]byte] // the last generation request's body, at GET /sim/last
	cache                                   *prefixcache.Cache
	promptTokens, cachedTokens              atomic.Int64
	weightsSum                              string // see ServerConfig.Weights
}

// NewServer returns a server with defaults applied.
func NewServer(cfg ServerConfig) *Server {
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 16
	}
	if cfg.EmbeddingDims <= 0 {
		cfg.EmbeddingDims = 64
	}
	s := &Server{cfg: cfg}
	if cfg.Weights != "" {
		s.weightsSum = weightsSum(cfg.Weights)
	}
	if cfg.PrefixCacheTokens > 0 {
		s.cache = prefixcache.New(cfg.PrefixCacheTokens)
	}
	return s
}

// parseFlags parses a replica's flags. Errors name the flag and list the
// replica's flags; nothing is printed.
func parseFlags(args []string) (ServerConfig, string, error) {
	fs := flag.NewFlagSet("sim replica", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	var cfg ServerConfig
	fs.StringVar(&cfg.Model, "model", "sim", "model name reported in answers")
	fs.DurationVar(&cfg.TTFT, "ttft", 0, "time to first token")
	fs.Int64Var(&cfg.ContextLength, "context-length", 0, "the context window reported; 0: none")
	fs.Float64Var(&cfg.TokensPerSecond, "tokens-per-second", 0, "token rate; 0 = unthrottled")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", 16, "answer length when the request sets none")
	fs.IntVar(&cfg.EmbeddingDims, "embedding-dims", 64, "embedding dimensions")
	fs.DurationVar(&cfg.EmbeddingDelay, "embedding-delay", 0, "time each embeddings call takes")
	fs.IntVar(&cfg.FailStatus, "fail-status", 0, "answer every generation request with this status")
	fs.BoolVar(&cfg.Echo, "echo", false, "answer with the last message's text")
	fs.BoolVar(&cfg.Reasoning, "reasoning", false, "start every chat answer with reasoning_content")
	fs.IntVar(&cfg.PrefixCacheTokens, "prefix-cache-tokens", 0, "simulate a prefix cache of this many tokens")
	fs.Float64Var(&cfg.PrefillTokensPerSecond, "prefill-tokens-per-second", 0, "with a prefix cache: the rate uncached prompt tokens are processed at")
	fs.StringVar(&cfg.Weights, "weights", "", "the weights path the gateway gave; its sha256 is reported in X-Sim-Weights")
	if err := fs.Parse(args); err != nil {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name) })
		return cfg, "", fmt.Errorf("%w; the sim replica's flags are %s", err, strings.Join(names, ", "))
	}
	if fs.NArg() > 0 {
		return cfg, "", fmt.Errorf("unexpected argument %q: the sim replica takes only flags", fs.Arg(0))
	}
	return cfg, *listen, nil
}

// RunReplica is the entry point of a replica process: it parses flags,
// listens, prints its address on stdout and serves until SIGTERM.
func RunReplica(args []string) error {
	cfg, listen, err := parseFlags(args)
	if err != nil {
		return err
	}
	cfg.VisibleDevices = os.Getenv("CUDA_VISIBLE_DEVICES")
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("sim replica: %w", err)
	}
	fmt.Fprintf(os.Stdout, "%s%s\n", proc.AddrPrefix, ln.Addr())
	srv := &http.Server{Handler: NewServer(cfg), ReadHeaderTimeout: 10 * time.Second}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeHTTP routes the OpenAI endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health":
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	case "/sim/stats":
		writeJSON(w, http.StatusOK, map[string]int64{
			"requests": s.requests.Load(), "inflight": s.inflight.Load(),
			"canceled": s.canceled.Load(), "completed": s.completed.Load(),
			"prompt_tokens": s.promptTokens.Load(), "cached_tokens": s.cachedTokens.Load(),
		})
	case "/sim/last":
		w.Header().Set("Content-Type", "application/json")
		if b := s.last.Load(); b != nil {
			_, _ = w.Write(*b)
		} else {
			_, _ = w.Write([]byte("null"))
		}
	case "/v1/models":
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": s.cfg.Model, "object": "model", "created": 0, "owned_by": "llmgw-sim", "max_model_len": s.cfg.ContextLength,
				"visible_devices": s.cfg.VisibleDevices},
		}})
	case "/v1/chat/completions", "/v1/completions", "/v1/embeddings":
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, "use POST")
			return
		}
		if s.cfg.ContextLength > 0 {
			w.Header().Set("X-Sim-Context-Length", strconv.FormatInt(s.cfg.ContextLength, 10))
		}
		if s.weightsSum != "" {
			w.Header().Set("X-Sim-Weights", s.weightsSum)
		}
		if s.cfg.VisibleDevices != "" {
			w.Header().Set("X-Sim-Visible-Devices", s.cfg.VisibleDevices)
		}
		s.requests.Add(1)
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		s.generate(w, r)
	default:
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	var req request
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	s.last.Store(&body)
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, decodeError(err))
		return
	}
	if s.cfg.FailStatus != 0 {
		writeError(w, s.cfg.FailStatus, "simulated failure")
		return
	}
	if req.Model == "" {
		req.Model = s.cfg.Model
	}
	switch r.URL.Path {
	case "/v1/embeddings":
		err = s.embeddings(r.Context(), w, &req)
	case "/v1/completions":
		err = s.answer(w, r.Context(), &req, false)
	default:
		err = s.answer(w, r.Context(), &req, true)
	}
	if err != nil {
		if r.Context().Err() != nil {
			s.canceled.Add(1)
		}
		return
	}
	s.completed.Add(1)
}

func (s *Server) embeddings(ctx context.Context, w http.ResponseWriter, req *request) error {
	inputs, err := req.inputs()
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return err
	}
	if d := s.cfg.EmbeddingDelay; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	dims := s.cfg.EmbeddingDims
	if req.Dimensions > 0 {
		dims = req.Dimensions
	}
	data := make([]map[string]any, len(inputs))
	tokens := 0
	for i, in := range inputs {
		tokens += countTokens(in)
		var vec any = Embed(in, dims)
		if req.EncodingFormat == "base64" {
			vec = base64Floats(vec.([]float32))
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": vec}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "model": req.Model, "data": data,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens},
	})
	return nil
}

// Embed returns a deterministic unit vector for text: signed feature
// hashing of its lower-cased words, so texts that share words are close.
func Embed(text string, dims int) []float32 {
	v := make([]float32, dims)
	for _, word := range strings.Fields(strings.ToLower(text)) {
		word = strings.Trim(word, ".,;:!?\"'()")
		if word == "" {
			continue
		}
		h := fnv.New64a()
		_, _ = h.Write([]byte(word))
		x := h.Sum64()
		sign := float32(1)
		if x&(1<<63) != 0 {
			sign = -1
		}
		v[int(x%uint64(dims))] += sign
	}
	var norm float64
	for _, f := range v {
		norm += float64(f * f)
	}
	if norm == 0 {
		v[0] = 1
		return v
	}
	n := float32(1 / math.Sqrt(norm))
	for i := range v {
		v[i] *= n
	}
	return v
}

// base64Floats encodes a vector as OpenAI does for encoding_format
// "base64": little-endian float32s.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// decodeError says what is wrong with a body that did not decode, in the
// API's terms: the field and the type it must have, never Go's.
func decodeError(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("%s must be %s, not %s", te.Field, jsonKind(te.Type), te.Value)
	case errors.As(err, &te):
		return "the request body must be a JSON object"
	case errors.As(err, &se):
		return fmt.Sprintf("the request body is not valid JSON (at byte %d)", se.Offset)
	}
	return "the request body is not valid JSON"
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": nil}})
}

// weightsSum is the sha256 of a weights file, or of a directory's files
// (their paths and contents, in name order); "unreadable" when it cannot
// be read.
func weightsSum(path string) string {
	h := sha256.New()
	fi, err := os.Stat(path)
	if err != nil {
		return "unreadable"
	}
	if !fi.IsDir() {
		f, err := os.Open(path)
		if err != nil {
			return "unreadable"
		}
		defer f.Close()
		if _, err := io.Copy(h, f); err != nil {
			return "unreadable"
		}
		return hex.EncodeToString(h.Sum(nil))
	}
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(path, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(rel), len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "unreadable"
	}
	return hex.EncodeToString(h.Sum(nil))
}
