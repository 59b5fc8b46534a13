// Package llmkb is the llm_kb HTTP handler: knowledge bases per tenant in
// OpenAI's shapes (/v1/files, /v1/vector_stores and their files, batches
// and search), answered from by the Responses API's file_search tool and,
// for chat completions, by the knowledge bases a request names.
//
// Its parts live in packages of their own: docread reads documents,
// kbindex chunks and searches, kbstore keeps records and chunks (embedded
// in the data directory, or PostgreSQL shared by a cluster). This package
// is the HTTP surface, ingestion and retrieval.
package llmkb

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/internal/userfiles"
	"github.com/llmgw/llmgw/modules/llm"
	_ "github.com/llmgw/llmgw/modules/openai/messagesapi"  // Enter translates Messages requests
	_ "github.com/llmgw/llmgw/modules/openai/responsesapi" // and Responses requests
)

func init() {
	caddy.RegisterModule(KB{})
}

// KB serves knowledge bases: files, vector stores, search, and retrieval
// for generating requests that ask for it. Put it after llm_quota (stores
// belong to the tenant of the key) and before llm_guardrails and
// llm_cache (guardrails check the passages; the cache keys on them).
type KB struct {
	// Embedder is the catalog model that embeds chunks and queries
	// (/v1/embeddings). Default: none, keyword search alone.
	Embedder string `json:"embedder,omitempty"`
	// Postgres is a PostgreSQL connection string: every node of a cluster
	// reads and writes the same knowledge bases there, the files' bytes
	// included. Default: an embedded store in the data directory.
	Postgres string `json:"postgres,omitempty"`
	// MaxFileSize bounds one uploaded file, in bytes. Default: 512 MiB.
	MaxFileSize int64 `json:"max_file_size,omitempty"`
	// MaxResults is the passages a search gives when the request does not
	// say. Default: 10; a request may ask 1 to 50.
	MaxResults int `json:"max_results,omitempty"`
	// IndexMemory bounds the cache of query embeddings, in bytes.
	// Default: 64 MiB.
	IndexMemory int64 `json:"index_memory,omitempty"`
	// StoresFor gives the keys of a tenant (by path: org, org/team or
	// org/team/project; the nearest entry wins) vector stores that their
	// chat requests are answered from when the request names none.
	StoresFor map[string][]string `json:"stores_for,omitempty"`
	// IngestLease is how long a node holds a file it ingests without
	// news: once it runs out (the node stopped) another node takes the
	// file over. Default: 30s.
	IngestLease caddy.Duration `json:"ingest_lease,omitempty"`

	app     *llm.App
	svc     *service
	unadmin func() // lets go of the admin routes (admin.go)
	unlend  func() // stops lending the files to other handlers (lend.go)
	poolKey string
	logger  *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (KB) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_kb",
		New: func() caddy.Module { return new(KB) },
	}
}

var pool = caddy.NewUsagePool()

// Provision sets defaults and opens (or shares, across reloads) the
// knowledge bases' service: its store, index and ingestion queue.
func (k *KB) Provision(ctx caddy.Context) error {
	k.logger = ctx.Logger()
	if k.MaxFileSize == 0 {
		k.MaxFileSize = 512 << 20
	}
	if k.MaxResults == 0 {
		k.MaxResults = 10
	}
	if k.MaxResults < 1 || k.MaxResults > 50 {
		return fmt.Errorf("llm_kb: max_results %d: give 1 to 50", k.MaxResults)
	}
	if k.IngestLease == 0 {
		k.IngestLease = caddy.Duration(30 * time.Second)
	}
	if k.IndexMemory == 0 {
		k.IndexMemory = 64 << 20
	}
	a, err := ctx.App("llm")
	if err != nil {
		return err
	}
	k.app = a.(*llm.App)
	if k.Embedder != "" {
		if _, err := k.app.Lookup(k.Embedder); err != nil {
			return fmt.Errorf("llm_kb: embedder: %w", err)
		}
	}
	k.poolKey = "kb:" + k.Postgres
	if k.Postgres == "" {
		k.poolKey = "kb:" + filepath.Join(caddy.AppDataDir(), "llm", "kb")
	}
	d := newDeps(k.app, k.logger, time.Duration(k.IngestLease))
	v, _, err := pool.LoadOrNew(k.poolKey, func() (caddy.Destructor, error) {
		return openService(k.Postgres, k.IndexMemory, k.app.MirrorStores(), d)
	})
	if err != nil {
		return fmt.Errorf("llm_kb: %w", err)
	}
	k.svc = v.(*service)
	k.svc.use(d)
	k.unadmin = k.app.RegisterAdmin("kb", kbAdmin{k})
	k.unlend = userfiles.Register(k.poolKey, k.svc)
	return registerMetrics(ctx.GetMetricsRegistry(), k.svc)
}

// Cleanup lets go of the service; the last handler using it closes it.
func (k *KB) Cleanup() error {
	if k.unlend != nil {
		k.unlend()
	}
	if k.unadmin != nil {
		k.unadmin()
	}
	if k.poolKey != "" {
		_, _ = pool.Delete(k.poolKey)
	}
	return nil
}

// pollAfter is what the official clients wait between polls of a file or
// batch in progress (the openai-poll-after-ms header).
const pollAfter = 250 * time.Millisecond

var (
	_ caddy.Provisioner  = (*KB)(nil)
	_ caddy.CleanerUpper = (*KB)(nil)
)
