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

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

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
