package weights

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"go.uber.org/zap"
)

// MirrorConfig configures the weights mirror: where model versions are
// stored, the node's cache of them, and the registry hf:// sources name.
// Models whose source is mirror://<model>[/<version>[/<file>]], hf://… or
// an http(s) URL (for engines that load weight files) get their weights
// through it: added to the stores if missing, fetched to the node cache,
// verified, and only then handed to the engine.
type MirrorConfig struct {
	// Stores keep the versions; with two, each copies what it lacks from
	// the other. Default: one directory store named "local" under Caddy's
	// data directory.
	Stores []*StoreConfig `json:"stores,omitempty"`
	// Cache is the node cache directory. Default: "mirror-cache" under
	// Caddy's data directory.
	Cache string `json:"cache,omitempty"`
	// CacheSize caps the node cache in bytes; least recently used versions
	// no replica uses are evicted. Default: 0, no cap.
	CacheSize int64 `json:"cache_size,omitempty"`
	// Registry is the base URL of the model registry hf:// sources name.
	// Default: the HF_ENDPOINT environment variable. Its token comes from
	// HF_TOKEN.
	Registry string `json:"registry,omitempty"`
	// SyncInterval is how often two stores are reconciled. Default: 5m.
	SyncInterval caddy.Duration `json:"sync_interval,omitempty"`
	// VerifyEvery makes every Nth reconciliation read and check every
	// stored file. Default: 288 (daily at the default interval); -1: never.
	VerifyEvery int `json:"verify_every,omitempty"`
}

// StoreConfig is one store of the mirror.
type StoreConfig struct {
	// Name names the store in messages, the admin API and the CLI.
	Name string `json:"name"`
	// Type is dir or s3.
	Type string `json:"type"`
	// Path is a dir store's directory.
	Path string `json:"path,omitempty"`
	// Endpoint (host:port), Bucket, Prefix and Region locate an s3 store.
	Endpoint string `json:"endpoint,omitempty"`
	Bucket   string `json:"bucket,omitempty"`
	Prefix   string `json:"prefix,omitempty"`
	Region   string `json:"region,omitempty"`
	// TLS connects with https.
	TLS bool `json:"tls,omitempty"`
	// AccessKeyEnv and SecretKeyEnv name the environment variables holding
	// the keys. Default: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	AccessKeyEnv string `json:"access_key_env,omitempty"`
	SecretKeyEnv string `json:"secret_key_env,omitempty"`
	// PartSize is the multipart part size in bytes. Default: 16 MiB.
	PartSize int64 `json:"part_size,omitempty"`
}

var mirrors = caddy.NewUsagePool()

type mirrorHandle struct {
	m      *mirror.Mirror
	cancel context.CancelFunc
}

func (h *mirrorHandle) Destruct() error {
	h.cancel()
	return nil
}

// WithDefaults fills in the defaults of a mirror config.
func (c *MirrorConfig) WithDefaults(dataDir string) MirrorConfig {
	out := MirrorConfig{}
	if c != nil {
		out = *c
	}
	if len(out.Stores) == 0 {
		out.Stores = []*StoreConfig{{Name: "local", Type: "dir", Path: filepath.Join(dataDir, "mirror")}}
	}
	if out.Cache == "" {
		out.Cache = filepath.Join(dataDir, "mirror-cache")
	}
	if out.Registry == "" {
		out.Registry = os.Getenv("HF_ENDPOINT")
	}
	if out.SyncInterval == 0 {
		out.SyncInterval = caddy.Duration(5 * time.Minute)
	}
	if out.VerifyEvery == 0 {
		out.VerifyEvery = 288
	}
	return out
}

// Validate checks a mirror config without contacting anything.
func (c *MirrorConfig) Validate() error {
	if c == nil {
		return nil
	}
	if len(c.Stores) > 2 {
		return fmt.Errorf("mirror: %d stores configured; use one or two", len(c.Stores))
	}
	seen := map[string]bool{}
	for _, s := range c.Stores {
		if err := mirror.CheckName("store", s.Name); err != nil {
			return fmt.Errorf("mirror: %w", err)
		}
		if seen[s.Name] {
			return fmt.Errorf("mirror: store %q is configured twice", s.Name)
		}
		seen[s.Name] = true
		switch s.Type {
		case "dir":
			if s.Path == "" {
				return fmt.Errorf("mirror: store %s: a dir store needs a path", s.Name)
			}
		case "s3":
			if s.Endpoint == "" || s.Bucket == "" {
				return fmt.Errorf("mirror: store %s: an s3 store needs endpoint and bucket", s.Name)
			}
		default:
			return fmt.Errorf("mirror: store %s: type %q is not dir or s3", s.Name, s.Type)
		}
	}
	if c.CacheSize < 0 {
		return errors.New("mirror: cache size must not be negative")
	}
	return nil
}

// NewMirror builds a mirror from its config; dataDir holds the defaults.
// It contacts no store. The llmgw mirror command uses it too.
func NewMirror(c *MirrorConfig, dataDir string, logger *zap.Logger) (*mirror.Mirror, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cfg := c.WithDefaults(dataDir)
	var stores []mirror.Store
	for _, sc := range cfg.Stores {
		switch sc.Type {
		case "dir":
			s, err := mirror.NewDirStore(sc.Name, sc.Path)
			if err != nil {
				return nil, err
			}
			stores = append(stores, s)
		case "s3":
			akEnv, skEnv := sc.AccessKeyEnv, sc.SecretKeyEnv
			if akEnv == "" {
				akEnv = "AWS_ACCESS_KEY_ID"
			}
			if skEnv == "" {
				skEnv = "AWS_SECRET_ACCESS_KEY"
			}
			s, err := mirror.NewS3Store(sc.Name, mirror.S3Config{Endpoint: sc.Endpoint, Bucket: sc.Bucket, Prefix: sc.Prefix,
				Region: sc.Region, TLS: sc.TLS, AccessKey: os.Getenv(akEnv), SecretKey: os.Getenv(skEnv), PartSize: sc.PartSize,
				KeysFrom: "$" + akEnv + " and $" + skEnv})
			if err != nil {
				return nil, err
			}
			stores = append(stores, s)
		}
	}
	return mirror.New(mirror.Config{Stores: stores, CacheDir: cfg.Cache, CacheSize: cfg.CacheSize,
		Registry: cfg.Registry, RegistryToken: os.Getenv("HF_TOKEN"), Logger: logger})
}

// IsMirrorSource tells whether a model's source names the mirror or a
// registry.
func IsMirrorSource(s string) bool {
	return strings.HasPrefix(s, "mirror://") || strings.HasPrefix(s, "hf://")
}

// ResolveSource finds (or adds) the mirror version a source names and
// fetches it. mirror://m[/v[/file]] names a stored version; an hf:// or
// URL source is added under the catalog model's name the first time and
// found by its origin after that.
func ResolveSource(ctx context.Context, mr *mirror.Mirror, m *catalog.Model, logger *zap.Logger) (*mirror.Fetched, string, error) {
	src := m.EngineSource()
	var model, version, file string
	if rest, ok := strings.CutPrefix(src, "mirror://"); ok {
		parts := strings.SplitN(rest, "/", 3)
		model = parts[0]
		if len(parts) > 1 {
			version = parts[1]
		}
		if len(parts) > 2 {
			file = parts[2]
		}
	} else {
		model = mirror.NameFor(m.Name)
		list, _ := mr.List(ctx) // oldest first: the current version, else the newest
		for _, v := range list {
			if v.Model == model && v.Origin.Source == src {
				if version = v.Version; v.Current {
					break
				}
			}
		}
		if version == "" {
			logger.Info("adding weights to the mirror", zap.String("model", m.Name), zap.String("source", mirror.RedactURL(src)))
			res, err := mr.Add(ctx, mirror.AddOptions{Model: model, Source: src, AllowPickle: m.Options["allow_pickle"] == "true",
				Track: strings.HasPrefix(src, "hf://")})
			if err != nil {
				// With the stores out of reach, a copy this node fetched before serves.
				if fe, ferr := mr.Fetch(ctx, model, ""); ferr == nil {
					logger.Warn("weights not added to the mirror; using the node's copy", zap.String("model", m.Name), zap.Error(err))
					return pickFile(m, fe, "")
				}
				return nil, "", fmt.Errorf("model %q: adding %s to the mirror: %w", m.Name, mirror.RedactURL(src), err)
			}
			if perr := res.PendingError(); perr != nil {
				logger.Warn("weights not on every store yet", zap.String("model", m.Name), zap.Error(perr))
			}
			version = res.Manifest.Version
		}
	}
	fe, err := mr.Fetch(ctx, model, version)
	if err != nil {
		return nil, "", fmt.Errorf("model %q: fetching weights: %w", m.Name, err)
	}
	return pickFile(m, fe, file)
}

// pickFile is the path to hand the engine: the named file, the one GGUF
// file of the version, or its directory.
func pickFile(m *catalog.Model, fe *mirror.Fetched, file string) (*mirror.Fetched, string, error) {
	if file != "" {
		for _, f := range fe.Manifest.Files {
			if f.Path == file {
				return fe, fe.Path(file), nil
			}
		}
		fe.Release()
		return nil, "", fmt.Errorf("model %q: %s/%s has no file %q", m.Name, fe.Manifest.Model, fe.Manifest.Version, file)
	}
	// One GGUF file is what engines that load GGUF want; else the directory.
	var gguf []string
	for _, f := range fe.Manifest.Files {
		if strings.HasSuffix(strings.ToLower(f.Path), ".gguf") {
			gguf = append(gguf, f.Path)
		}
	}
	if len(gguf) == 1 {
		return fe, fe.Path(gguf[0]), nil
	}
	return fe, fe.Dir, nil
}
