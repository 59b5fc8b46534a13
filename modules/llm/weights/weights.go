package weights

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"go.uber.org/zap"
)

// AdaptersNeedMirror says whether an adapter of the models comes through
// the mirror.
func AdaptersNeedMirror(models []*catalog.Model) bool {
	for _, m := range models {
		for _, a := range m.Adapters {
			if ViaMirror(a.Source) {
				return true
			}
		}
	}
	return false
}

// ViaMirror tells whether an adapter's source goes through the mirror.
func ViaMirror(src string) bool {
	return IsMirrorSource(src) || strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://")
}

// WithAdapterSources is models and, for each adapter, an entry with the
// adapter's name and source: what uses a file of the node's weights
// directory.
func WithAdapterSources(models []*catalog.Model) []*catalog.Model {
	out := models
	for _, m := range models {
		for _, a := range m.Adapters {
			if len(out) == len(models) {
				out = slices.Clone(models)
			}
			out = append(out, &catalog.Model{Name: a.Name, Source: a.Source})
		}
	}
	return out
}

// MirrorRef is the mirror model (and version, if pinned) a catalog
// model's weights come from, or ok false when they do not come through the
// mirror.
func MirrorRef(m *catalog.Model) (model, version string, ok bool) {
	if rest, found := strings.CutPrefix(m.Source, "mirror://"); found {
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) > 1 {
			version = parts[1]
		}
		return parts[0], version, true
	}
	if strings.HasPrefix(m.Source, "hf://") || strings.HasPrefix(m.Source, "http://") || strings.HasPrefix(m.Source, "https://") {
		return mirror.NameFor(m.Name), "", true
	}
	return "", "", false
}

// Parse reads the mirror block of the llm global option:
//
//	mirror {
//		store <name> dir <path>
//		store <name> s3 {
//			endpoint       <host:port>
//			bucket         <bucket>
//			prefix         <prefix>
//			region         <region>
//			tls
//			access_key_env <VAR>    # default AWS_ACCESS_KEY_ID
//			secret_key_env <VAR>    # default AWS_SECRET_ACCESS_KEY
//			part_size      <size>   # default 16MiB
//		}
//		cache         <dir> [<max size>]
//		registry      <url>         # default $HF_ENDPOINT
//		sync_interval <duration>    # default 5m
//		verify_every  <n>           # default 288; -1 never
//	}
func (c *MirrorConfig) Parse(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	err := caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "store":
			return c.parseStore(d)
		case "cache":
			if !d.NextArg() {
				return d.ArgErr()
			}
			c.Cache = d.Val()
			if d.NextArg() {
				n, perr := humanize.ParseBytes(d.Val())
				if perr != nil {
					return d.Errf("cache size %q is not a size such as 200GiB", d.Val())
				}
				c.CacheSize = int64(n)
			}
			if d.NextArg() {
				return d.ArgErr()
			}
		case "registry":
			return caddyfileutil.OneArg(d, &c.Registry)
		case "sync_interval":
			return caddyfileutil.DurationArg(d, &c.SyncInterval)
		case "verify_every":
			return caddyfileutil.IntArg(d, &c.VerifyEvery, -1)
		default:
			return d.Errf("unrecognized mirror subdirective %q; use store, cache, registry, sync_interval or verify_every", dir)
		}
		return nil
	}, "store")
	if err != nil {
		return err
	}
	if len(c.Stores) > 2 {
		return d.Errf("the mirror takes one or two stores, not %d", len(c.Stores))
	}
	return nil
}

func (c *MirrorConfig) parseStore(d *caddyfile.Dispenser) error {
	sc := new(StoreConfig)
	if !d.NextArg() {
		return d.ArgErr()
	}
	sc.Name = d.Val()
	for _, o := range c.Stores {
		if o.Name == sc.Name {
			return d.Errf("store %q is configured twice", sc.Name)
		}
	}
	if !d.NextArg() {
		return d.Errf("store %s: give its type, dir <path> or s3 { … }", sc.Name)
	}
	sc.Type = d.Val()
	switch sc.Type {
	case "dir":
		if !d.NextArg() {
			return d.Errf("store %s: a dir store needs a path", sc.Name)
		}
		sc.Path = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	case "s3":
		if d.NextArg() {
			return d.ArgErr()
		}
		err := caddyfileutil.EachSubdirective(d, func(dir string) error {
			switch dir {
			case "endpoint":
				return caddyfileutil.OneArg(d, &sc.Endpoint)
			case "bucket":
				return caddyfileutil.OneArg(d, &sc.Bucket)
			case "prefix":
				return caddyfileutil.OneArg(d, &sc.Prefix)
			case "region":
				return caddyfileutil.OneArg(d, &sc.Region)
			case "tls":
				if d.NextArg() {
					return d.ArgErr()
				}
				sc.TLS = true
			case "access_key_env":
				return caddyfileutil.OneArg(d, &sc.AccessKeyEnv)
			case "secret_key_env":
				return caddyfileutil.OneArg(d, &sc.SecretKeyEnv)
			case "part_size":
				var s string
				if err := caddyfileutil.OneArg(d, &s); err != nil {
					return err
				}
				n, err := humanize.ParseBytes(s)
				if err != nil {
					return d.Errf("part_size %q is not a size such as 16MiB", s)
				}
				sc.PartSize = int64(n)
			default:
				return d.Errf("unrecognized s3 store subdirective %q", dir)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if sc.Endpoint == "" || sc.Bucket == "" {
			return d.Errf("store %s: an s3 store needs endpoint and bucket", sc.Name)
		}
	default:
		return d.Errf("store %s: type %q is not dir or s3", sc.Name, sc.Type)
	}
	c.Stores = append(c.Stores, sc)
	return nil
}

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

// SourceCheckTimeout bounds the whole check of one source: a few requests,
// never a download.
const SourceCheckTimeout = 5 * time.Second

// SourceError is a source that failed its check: what is wrong and how
// to fix it. The admin API answers it with 422.
type SourceError struct{ msg string }

func (e *SourceError) Error() string { return e.msg }

func sourceErr(format string, args ...any) error {
	return &SourceError{msg: fmt.Sprintf(format, args...) + "; or add it with \"check_source\": false if only the nodes can reach it"}
}

// SourceChecker checks sources against what the app can reach.
type SourceChecker struct {
	Client *http.Client
	// URLClient fetches URL sources (default client): the egress
	// policy's, for sources given at run time.
	URLClient *http.Client
	Mirror    *mirror.Mirror // nil when the app has none
	Registry  string         // the registry hf:// sources name
	Token     string
}

// Check looks at a model's source without downloading it: the file or
// URL exists and answers, the registry repository and file exist, the
// mirror version exists, and the weights are in a format one of formats
// (the engine's) names.
func (c *SourceChecker) Check(ctx context.Context, m *catalog.Model, formats []string) (llmapi.SourceCheck, error) {
	ctx, cancel := context.WithTimeout(ctx, SourceCheckTimeout)
	defer cancel()
	src := m.EngineSource()
	res := llmapi.SourceCheck{Source: mirror.RedactURL(src), Checked: true}
	loadsFiles := slices.Contains(formats, catalog.FormatGGUF) || slices.Contains(formats, catalog.FormatSafetensors)
	var err error
	switch {
	case src == "":
		res.Kind, res.Checked, res.Note = "none", false, "the model has no source"
	case strings.HasPrefix(src, "mirror://"):
		res.Kind = "mirror"
		err = c.checkMirror(ctx, m, &res, formats)
	case strings.HasPrefix(src, "hf://"):
		res.Kind = "registry"
		err = c.checkRegistry(ctx, &res, src, formats)
	case !loadsFiles:
		res.Kind, res.Checked, res.Note = "none", false, fmt.Sprintf("engine %s loads no weight files; the source goes to it as it is", m.Engine)
	case strings.HasPrefix(src, "http://"), strings.HasPrefix(src, "https://"):
		res.Kind = "url"
		err = c.checkURL(ctx, &res, src)
	case strings.Contains(src, "://"):
		res.Kind, res.Checked, res.Note = "none", false, "not a scheme llmgw fetches; the source goes to the engine as it is"
	default:
		res.Kind = "local"
		err = checkLocal(&res, src)
	}
	if err == nil && (res.Kind == "url" || res.Kind == "registry") && c.Mirror == nil {
		err = sourceErr("source %s is fetched through the weights mirror, which this llmgw has not configured; add a mirror block to the llm app", res.Source)
	}
	if err != nil {
		return res, err
	}
	if loadsFiles && res.Checked && !slices.Contains(formats, res.Format) {
		what := res.Format
		if what == "" {
			what = "neither GGUF nor safetensors"
		}
		return res, sourceErr("model %q: engine %s loads %s weights and %s is %s; point source at %s weights",
			m.Name, m.Engine, strings.Join(formats, " or "), res.Source, what, strings.Join(formats, " or "))
	}
	return res, nil
}

// checkLocal sizes a local file or directory and reads its format.
func checkLocal(res *llmapi.SourceCheck, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return sourceErr("source %s: %v; give a path this node can read", src, errors.Unwrap(err))
	}
	res.Format, _ = catalog.SourceFormat(src)
	if !st.IsDir() {
		res.Size, res.Files = st.Size(), 1
		return nil
	}
	_ = filepath.WalkDir(src, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if i, err := d.Info(); err == nil {
				res.Size += i.Size()
				res.Files++
			}
		}
		return nil
	})
	return nil
}

// checkURL asks the URL for its size (HEAD, or a ranged GET when HEAD is
// refused) and reads its first bytes for the format.
func (c *SourceChecker) checkURL(ctx context.Context, res *llmapi.SourceCheck, src string) error {
	u, err := url.Parse(src)
	if err != nil || u.Host == "" {
		return sourceErr("source %s is not a URL llmgw can fetch; give http(s)://host/path/to/weights.gguf", res.Source)
	}
	if name := path.Base(u.Path); name == "/" || name == "." || name == "" {
		return sourceErr("source %s names no file; give the URL of the weights file", res.Source)
	}
	resp, err := c.do(ctx, http.MethodHead, src, "")
	if err == nil && (resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented || resp.StatusCode == http.StatusForbidden) {
		resp.Body.Close()
		resp = nil
	}
	head, err := c.head(ctx, src, resp, err)
	if err != nil {
		return err
	}
	res.Size, res.Files = head.size, 1
	res.Format = magicFormat(head.first)
	return nil
}

type urlHead struct {
	size  int64
	first []byte
}

// head finishes checkURL: the size from HEAD when it answered, the first
// bytes from a ranged GET (which also gives the size when HEAD did not).
func (c *SourceChecker) head(ctx context.Context, src string, hresp *http.Response, herr error) (urlHead, error) {
	var h urlHead
	h.size = -1
	if herr != nil {
		return h, sourceErr("source %s does not answer: %v; check the host and the network", mirror.RedactURL(src), stripURL(herr))
	}
	if hresp != nil {
		hresp.Body.Close()
		if hresp.StatusCode != http.StatusOK {
			return h, statusErr(src, hresp.Status)
		}
		h.size = hresp.ContentLength
	}
	resp, err := c.do(ctx, http.MethodGet, src, "bytes=0-15")
	if err != nil {
		return h, sourceErr("source %s does not answer: %v; check the host and the network", mirror.RedactURL(src), stripURL(err))
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		if _, total, ok := strings.Cut(resp.Header.Get("Content-Range"), "/"); ok && h.size < 0 {
			h.size, _ = strconv.ParseInt(total, 10, 64)
		}
	case http.StatusOK:
		if h.size < 0 {
			h.size = resp.ContentLength
		}
	default:
		return h, statusErr(src, resp.Status)
	}
	h.first, _ = io.ReadAll(io.LimitReader(resp.Body, 16)) // a server that ignores Range is cut off here
	h.size = max(h.size, 0)
	return h, nil
}

func statusErr(src, status string) error {
	return sourceErr("source %s answered %s; check the URL (and a token in it, for private files)", mirror.RedactURL(src), status)
}

// stripURL keeps a URL's query out of a client error.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (c *SourceChecker) do(ctx context.Context, method, u, rng string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	if c.Token != "" && c.Registry != "" && strings.HasPrefix(u, strings.TrimSuffix(c.Registry, "/")+"/") {
		req.Header.Set("Authorization", "Bearer "+c.Token)
		return c.Client.Do(req)
	}
	if c.URLClient != nil {
		return c.URLClient.Do(req)
	}
	return c.Client.Do(req)
}

// magicFormat tells GGUF or safetensors from a file's first bytes.
func magicFormat(b []byte) string {
	if len(b) >= 4 && string(b[:4]) == "GGUF" {
		return catalog.FormatGGUF
	}
	// safetensors: a little-endian header length, then a JSON object.
	if len(b) >= 9 && b[8] == '{' && binary.LittleEndian.Uint64(b[:8]) < 100<<20 {
		return catalog.FormatSafetensors
	}
	return ""
}

// nameFormat tells a weights format from file names, as the mirror does,
// the engine's formats first.
func nameFormat(names, formats []string) string {
	for _, want := range append(slices.Clone(formats), catalog.FormatGGUF, catalog.FormatSafetensors) {
		for _, n := range names {
			if strings.HasSuffix(strings.ToLower(n), "."+want) {
				return want
			}
		}
	}
	return ""
}

// checkMirror finds the version a mirror://model[/version[/file]] source
// names in the mirror's stores.
func (c *SourceChecker) checkMirror(ctx context.Context, m *catalog.Model, res *llmapi.SourceCheck, formats []string) error {
	if c.Mirror == nil {
		return sourceErr("source %s needs the mirror; configure it with a mirror block in the llm app", res.Source)
	}
	parts := strings.SplitN(strings.TrimPrefix(m.Source, "mirror://"), "/", 3)
	model, version, file := parts[0], "", ""
	if len(parts) > 1 {
		version = parts[1]
	}
	if len(parts) > 2 {
		file = parts[2]
	}
	if version == "" {
		v, err := c.Mirror.Current(ctx, model)
		if errors.Is(err, mirror.ErrNotFound) {
			return sourceErr("source %s: model %s has no version in the mirror; add one with llmgw mirror add or POST /llm/mirror/versions", res.Source, model)
		}
		if err != nil {
			return sourceErr("source %s: the mirror's stores do not answer: %v", res.Source, err)
		}
		version = v
	}
	man, err := c.Mirror.Show(ctx, model, version)
	if errors.Is(err, mirror.ErrNotFound) {
		return sourceErr("source %s: version %s/%s does not exist in the mirror%s; GET /llm/mirror/versions lists the versions",
			res.Source, model, version, c.versionsOf(ctx, model))
	}
	if err != nil {
		return sourceErr("source %s: the mirror's stores do not answer: %v", res.Source, err)
	}
	var names []string
	for _, f := range man.Files {
		if file == "" || f.Path == file {
			names = append(names, f.Path)
			res.Size += f.Size
			res.Files++
		}
	}
	if file != "" && res.Files == 0 {
		return sourceErr("source %s: version %s/%s has no file %q", res.Source, model, version, file)
	}
	res.Format = nameFormat(names, formats)
	return nil
}

// versionsOf names a model's versions in the mirror, for a message.
func (c *SourceChecker) versionsOf(ctx context.Context, model string) string {
	list, _ := c.Mirror.List(ctx)
	var vs []string
	for _, v := range list {
		if v.Model == model {
			vs = append(vs, v.Version)
		}
	}
	if len(vs) == 0 {
		return " (the mirror has no version of " + model + ")"
	}
	return " (it has " + strings.Join(vs, ", ") + ")"
}

// checkRegistry finds the repository, revision and files an
// hf://org/repo[@revision][/path] source names, through the registry's
// API, and sums their sizes.
func (c *SourceChecker) checkRegistry(ctx context.Context, res *llmapi.SourceCheck, src string, formats []string) error {
	ref, err := mirror.ParseRegistryRef(src)
	if err != nil {
		return sourceErr("source %v", err)
	}
	if c.Registry == "" {
		return sourceErr("source %s: hf:// sources need the registry's base URL; set registry in the mirror block or the HF_ENDPOINT environment variable", res.Source)
	}
	base := strings.TrimSuffix(c.Registry, "/")
	var rev struct {
		SHA string `json:"sha"`
	}
	if _, err := c.getJSON(ctx, base+"/api/models/"+ref.Repository+"/revision/"+url.PathEscape(ref.Revision), &rev); err != nil {
		return sourceErr("source %s: repository %s at revision %s: %v", res.Source, ref.Repository, ref.Revision, err)
	}
	var list []registryEntry
	next := base + "/api/models/" + ref.Repository + "/tree/" + rev.SHA + "?recursive=true"
	for pages := 0; next != "" && pages < maxRegistryPages; pages++ {
		var page []registryEntry
		var err error
		if next, err = c.getJSON(ctx, next, &page); err != nil {
			return sourceErr("source %s: listing repository %s: %v", res.Source, ref.Repository, err)
		}
		list = append(list, page...)
	}
	var names []string
	for _, f := range list {
		if f.Type != "file" || f.Path == ".gitattributes" {
			continue
		}
		if ref.Path != "" && f.Path != ref.Path && !strings.HasPrefix(f.Path, ref.Path+"/") {
			continue
		}
		names = append(names, f.Path)
		res.Size += f.Size
		if f.LFS != nil {
			res.Size += f.LFS.Size - f.Size
		}
	}
	if len(names) == 0 {
		return sourceErr("source %s: repository %s has no file at %q", res.Source, ref.Repository, ref.Path)
	}
	res.Files, res.Format = len(names), nameFormat(names, formats)
	return nil
}

type registryEntry struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	LFS  *struct {
		Size int64 `json:"size"`
	} `json:"lfs"`
}

// maxRegistryPages bounds the pages of a repository listing read.
const maxRegistryPages = 20

// getJSON decodes a registry answer and returns the URL of its next page.
func (c *SourceChecker) getJSON(ctx context.Context, u string, v any) (string, error) {
	resp, err := c.do(ctx, http.MethodGet, u, "")
	if err != nil {
		return "", fmt.Errorf("the registry does not answer: %w", stripURL(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return "", errors.New("not found in the registry; check the name and revision")
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return "", fmt.Errorf("the registry refused it (%s); set a token with HF_TOKEN for gated or private repositories", resp.Status)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("the registry answered %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(v); err != nil {
		return "", fmt.Errorf("decoding the registry's answer: %w", err)
	}
	return mirror.NextLink(resp.Header.Get("Link")), nil
}

// DefaultUpdateCheck is how often the registry is asked by default.
const DefaultUpdateCheck = 6 * time.Hour

// trackedMirrorModel is the mirror model a catalog model's replicas
// follow when its source is a registry repository or a mirror model
// without a version; ok is false for other sources.
func TrackedModel(m *catalog.Model) (string, bool) {
	if strings.HasPrefix(m.Source, "hf://") {
		return mirror.NameFor(m.Name), true
	}
	if rest, ok := strings.CutPrefix(m.Source, "mirror://"); ok && rest != "" && !strings.Contains(rest, "/") {
		return rest, true
	}
	return "", false
}

// weightsUse is what the catalog uses of the mirror: versions by id
// (model/version) and mirror models of which every version counts.
type Use struct {
	IDs   map[string][]string // model/version → catalog models
	Whole map[string][]string // mirror model → catalog models
	Why   map[string]string   // mirror model → why every version counts
}

// Keep tells whether a catalog model uses the mirror version.
func (u Use) Keep(model, version string) bool {
	return len(u.IDs[model+"/"+version]) > 0 || len(u.Whole[model]) > 0
}

// Open builds the mirror c describes, or takes the one an earlier config
// with the same mirror block built (mirrors live in a pool across
// reloads), and starts its reconciliation between stores. key is what
// Close takes when the config that opened it stops.
func Open(c *MirrorConfig, dataDir string, logger *zap.Logger) (*mirror.Mirror, string, error) {
	cfg := c.WithDefaults(dataDir)
	b, _ := json.Marshal(cfg)
	key := "mirror:" + string(b)
	val, _, err := mirrors.LoadOrNew(key, func() (caddy.Destructor, error) {
		m, err := NewMirror(c, dataDir, logger)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		if len(cfg.Stores) > 1 {
			go m.Run(ctx, time.Duration(cfg.SyncInterval), max(cfg.VerifyEvery, 0))
		}
		return &mirrorHandle{m: m, cancel: cancel}, nil
	})
	if err != nil {
		return nil, "", err
	}
	return val.(*mirrorHandle).m, key, nil
}

// Close lets go of the mirror Open gave under key; the last user's close
// stops it.
func Close(key string) { _, _ = mirrors.Delete(key) }

// SourceErrorf is a SourceError with the message format gives.
func SourceErrorf(format string, args ...any) error { return sourceErr(format, args...) }

// Interface guards
var _ caddy.Destructor = (*mirrorHandle)(nil)
