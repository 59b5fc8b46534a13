package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// srcFile is one file a source offers: where it goes in the version, its
// size and sum once known, and the local file that holds it.
type srcFile struct {
	File
	local string
	// staged files are downloads, removed once stored.
	staged bool
}

// resolved is what a source gives: files and their origin.
type resolved struct {
	files  []srcFile
	origin Origin
	// version the source suggests (a registry commit), if any.
	version string
}

// resolve fetches or finds a source's files and hashes them.
func (m *Mirror) resolve(ctx context.Context, model, source string) (*resolved, error) {
	switch {
	case strings.HasPrefix(source, "hf://"):
		return m.resolveRegistry(ctx, model, source)
	case strings.HasPrefix(source, "http://"), strings.HasPrefix(source, "https://"):
		u, err := url.Parse(source)
		if err != nil {
			return nil, fmt.Errorf("source %q: %w", source, err)
		}
		name := path.Base(u.Path)
		if name == "/" || name == "." || name == "" {
			return nil, fmt.Errorf("source %q names no file; give the URL of the weights file", source)
		}
		local, sum, size, err := m.download(ctx, source, "", -1, &Transfer{Kind: "download", Model: model, File: name})
		if err != nil {
			return nil, err
		}
		return &resolved{files: []srcFile{{File: File{Path: name, Size: size, SHA256: sum}, local: local, staged: true}}, origin: Origin{Source: source}}, nil
	case strings.Contains(source, "://"):
		return nil, fmt.Errorf("source %q: unknown scheme; use a local path, http(s):// or hf://org/repo", source)
	default:
		return m.resolveLocal(ctx, source)
	}
}

// resolveLocal takes a file or every file under a directory.
func (m *Mirror) resolveLocal(ctx context.Context, source string) (*resolved, error) {
	abs, err := filepath.Abs(source)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", source, err)
	}
	r := &resolved{origin: Origin{Source: abs}}
	// Sums are left for the upload to compute: a second pass over
	// multi-GB files is what users would wait for.
	add := func(p, rel string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		r.files = append(r.files, srcFile{File: File{Path: filepath.ToSlash(rel), Size: fi.Size()}, local: p})
		return nil
	}
	if !fi.IsDir() {
		return r, add(abs, filepath.Base(abs))
	}
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != abs && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(abs, p)
		return add(p, rel)
	})
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", source, err)
	}
	if len(r.files) == 0 {
		return nil, fmt.Errorf("source %s holds no files", source)
	}
	return r, nil
}

// hashFile reads a file's sha256 and size.
func hashFile(ctx context.Context, p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, f})
	if err != nil {
		return "", 0, fmt.Errorf("reading %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// download fetches a URL to the staging directory, resuming with Range
// after an interruption (in this call or an earlier one), and checks the
// sum when one is expected. It returns the staged file, its sum and size.
func (m *Mirror) download(ctx context.Context, src, wantSum string, wantSize int64, t *Transfer) (string, string, int64, error) {
	dir := filepath.Join(m.cfg.WorkDir, "downloads")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", 0, err
	}
	id := sha256.Sum256([]byte(src))
	local := filepath.Join(dir, hex.EncodeToString(id[:8])+"-"+path.Base(src))
	part := local + ".part"
	m.tr.start(t)
	defer m.tr.end(t)
	t.Total = wantSize
	var lastErr error
	for attempt := range m.cfg.DownloadAttempts {
		if attempt > 0 {
			m.log.Info("resuming download", zap.String("url", RedactURL(src)), zap.Int("attempt", attempt+1), zap.Error(lastErr))
			select {
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			case <-ctx.Done():
				return "", "", 0, ctx.Err()
			}
		}
		done, err := m.downloadOnce(ctx, src, part, t)
		if err == nil {
			lastErr = nil
			break
		}
		lastErr = err
		if !done {
			var perm *permanentError
			if errors.As(err, &perm) {
				return "", "", 0, err
			}
		}
	}
	if lastErr != nil {
		return "", "", 0, fmt.Errorf("downloading %s: %w (the part already fetched is kept; adding again resumes it)", RedactURL(src), lastErr)
	}
	sum, size, err := hashFile(ctx, part)
	if err != nil {
		return "", "", 0, err
	}
	if (wantSum != "" && sum != wantSum) || (wantSize >= 0 && size != wantSize) {
		os.Remove(part)
		return "", "", 0, fmt.Errorf("downloading %s: got %d bytes with sha256 %s, want %d bytes with %s: %w", RedactURL(src), size, sum, wantSize, wantSum, ErrChecksum)
	}
	if err := os.Rename(part, local); err != nil {
		return "", "", 0, err
	}
	return local, sum, size, nil
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// downloadOnce makes one request, appending to part from its current size.
func (m *Mirror) downloadOnce(ctx context.Context, src, part string, t *Transfer) (bool, error) {
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return false, err
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return false, &permanentError{err}
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	m.authorize(req)
	resp, err := m.client(ctx).Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
		return true, nil // already whole
	case resp.StatusCode == http.StatusOK:
		// The server ignored the range: start over.
		if err := f.Truncate(0); err != nil {
			return false, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return false, err
		}
		have = 0
	default:
		err := fmt.Errorf("%s answered %s", RedactURL(src), resp.Status)
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return false, &permanentError{err}
		}
		return false, err
	}
	if t.Total < 0 && resp.ContentLength >= 0 {
		t.Total = have + resp.ContentLength
	}
	t.done.Store(have)
	_, err = io.Copy(io.MultiWriter(f, t.counter()), resp.Body)
	if err != nil {
		return false, err
	}
	if resp.ContentLength >= 0 {
		if fi, err := f.Stat(); err == nil && fi.Size() != have+resp.ContentLength {
			return false, fmt.Errorf("connection ended after %d of %d bytes", fi.Size(), have+resp.ContentLength)
		}
	}
	return true, nil
}

func (m *Mirror) authorize(req *http.Request) {
	if m.cfg.RegistryToken != "" && m.cfg.Registry != "" && strings.HasPrefix(req.URL.String(), strings.TrimSuffix(m.cfg.Registry, "/")+"/") {
		req.Header.Set("Authorization", "Bearer "+m.cfg.RegistryToken)
	}
}

// RedactURL drops a URL's query and user info, which may carry secrets;
// anything that is not a URL passes unchanged.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<url>"
	}
	if u.Scheme == "" {
		return s
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// RegistryRef is a parsed hf://org/repo[@revision][/path] reference.
type RegistryRef struct {
	Repository string
	Revision   string
	Path       string
}

// ParseRegistryRef parses hf://org/repo[@revision][/path].
func ParseRegistryRef(s string) (RegistryRef, error) {
	rest, ok := strings.CutPrefix(s, "hf://")
	if !ok {
		return RegistryRef{}, fmt.Errorf("%q is not an hf:// reference", s)
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return RegistryRef{}, fmt.Errorf("%q: want hf://org/repo[@revision][/path]", s)
	}
	ref := RegistryRef{Revision: "main"}
	repo := parts[1]
	if i := strings.IndexByte(repo, '@'); i >= 0 {
		ref.Revision = repo[i+1:]
		repo = repo[:i]
		if ref.Revision == "" || repo == "" {
			return RegistryRef{}, fmt.Errorf("%q: empty repository or revision", s)
		}
	}
	ref.Repository = parts[0] + "/" + repo
	if len(parts) == 3 {
		ref.Path = strings.Trim(parts[2], "/")
		if ref.Path != "" {
			if err := checkPath(ref.Path); err != nil {
				return RegistryRef{}, fmt.Errorf("%q: %w", s, err)
			}
		}
	}
	return ref, nil
}

// registryFile is an entry of the registry's tree listing.
type registryFile struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	Oid  string `json:"oid"`
	LFS  *struct {
		Oid  string `json:"oid"`
		Size int64  `json:"size"`
	} `json:"lfs"`
}

// registryBase is the registry's base URL, or an error that says how to set it.
func (m *Mirror) registryBase() (string, error) {
	if m.cfg.Registry == "" {
		return "", errors.New("hf:// sources need the registry's base URL; set registry in the mirror block or the HF_ENDPOINT environment variable")
	}
	return strings.TrimSuffix(m.cfg.Registry, "/"), nil
}

// Commit pins a repository's revision to a commit through the registry.
func (m *Mirror) Commit(ctx context.Context, ref RegistryRef) (string, error) {
	base, err := m.registryBase()
	if err != nil {
		return "", err
	}
	var info struct {
		SHA string `json:"sha"`
	}
	u := base + "/api/models/" + ref.Repository + "/revision/" + url.PathEscape(ref.Revision)
	if err := m.getJSON(ctx, u, &info, nil); err != nil {
		return "", err
	}
	if info.SHA == "" {
		return "", fmt.Errorf("registry gave no commit for %s@%s", ref.Repository, ref.Revision)
	}
	return info.SHA, nil
}

func (m *Mirror) getJSON(ctx context.Context, u string, v any, hdr *http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	m.authorize(req)
	resp, err := m.client(ctx).Do(req)
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("registry: %s: %w", RedactURL(u), ErrNotFound)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("registry refused %s (%s); set a token with HF_TOKEN for gated or private repositories", RedactURL(u), resp.Status)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("registry answered %s for %s", resp.Status, RedactURL(u))
	}
	if hdr != nil {
		*hdr = resp.Header
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v); err != nil {
		return fmt.Errorf("registry: decoding %s: %w", RedactURL(u), err)
	}
	return nil
}

// resolveRegistry pins the revision to a commit, lists the files with their
// sizes and sums, and downloads them, each checked against its sum.
func (m *Mirror) resolveRegistry(ctx context.Context, model, source string) (*resolved, error) {
	ref, err := ParseRegistryRef(source)
	if err != nil {
		return nil, err
	}
	base, err := m.registryBase()
	if err != nil {
		return nil, err
	}
	commit, err := m.Commit(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", source, err)
	}
	var list []registryFile
	next := base + "/api/models/" + ref.Repository + "/tree/" + commit + "?recursive=true"
	for next != "" {
		var page []registryFile
		var hdr http.Header
		if err := m.getJSON(ctx, next, &page, &hdr); err != nil {
			return nil, fmt.Errorf("listing %s: %w", source, err)
		}
		list = append(list, page...)
		next = NextLink(hdr.Get("Link"))
	}
	r := &resolved{origin: Origin{Source: source, Repository: ref.Repository, Revision: ref.Revision, Commit: commit, Registry: base}, version: shortCommit(commit)}
	for _, f := range list {
		if f.Type != "file" || f.Path == ".gitattributes" {
			continue
		}
		if ref.Path != "" && f.Path != ref.Path && !strings.HasPrefix(f.Path, ref.Path+"/") {
			continue
		}
		if err := checkPath(f.Path); err != nil {
			return nil, fmt.Errorf("registry listing of %s: %w", source, err)
		}
		rel := f.Path
		if ref.Path != "" && f.Path != ref.Path {
			rel = strings.TrimPrefix(f.Path, ref.Path+"/")
		} else if f.Path == ref.Path {
			rel = path.Base(f.Path)
		}
		file := File{Path: rel, Size: f.Size}
		if f.LFS != nil {
			file.SHA256, file.Size = f.LFS.Oid, f.LFS.Size
		}
		r.files = append(r.files, srcFile{File: file})
	}
	if len(r.files) == 0 {
		return nil, fmt.Errorf("%s: the repository has no files at %q", source, ref.Path)
	}
	if err := m.checkPickle(r.files, false); err != nil {
		return nil, err // refused before anything is downloaded
	}
	for i := range r.files {
		f := &r.files[i]
		full := f.Path
		if ref.Path != "" {
			if len(r.files) == 1 && path.Base(ref.Path) == f.Path {
				full = ref.Path
			} else {
				full = ref.Path + "/" + f.Path
			}
		}
		u := base + "/" + ref.Repository + "/resolve/" + commit + "/" + full
		local, sum, size, err := m.download(ctx, u, f.SHA256, f.Size, &Transfer{Kind: "download", Model: model, Version: r.version, File: f.Path})
		if err != nil {
			return nil, err
		}
		f.local, f.SHA256, f.Size, f.staged = local, sum, size, true
	}
	return r, nil
}

// NextLink reads the rel="next" URL of a Link header.
func NextLink(h string) string {
	for _, l := range strings.Split(h, ",") {
		seg := strings.Split(l, ";")
		if len(seg) < 2 {
			continue
		}
		for _, p := range seg[1:] {
			if strings.TrimSpace(p) == `rel="next"` {
				return strings.Trim(strings.TrimSpace(seg[0]), "<>")
			}
		}
	}
	return ""
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

type clientKey struct{}

// WithHTTPClient returns ctx with a client that fetches URL sources and
// registry files in its place of the mirror's own: a caller that takes a
// source from someone it does not trust (the admin API) gives one that
// checks where each connection and redirect goes.
func WithHTTPClient(ctx context.Context, c *http.Client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

func (m *Mirror) client(ctx context.Context) *http.Client {
	if c, ok := ctx.Value(clientKey{}).(*http.Client); ok && c != nil {
		return c
	}
	return m.cfg.HTTPClient
}
