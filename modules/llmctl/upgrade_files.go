package llmctl

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/llmgw/llmgw/release"
)

const (
	maxTarball = 1 << 30 // a release tarball is tens of MB
	maxSmall   = 1 << 20 // SHA256SUMS, its signature
)

var versionArg = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$`)

// location is where a release tarball and its SHA256SUMS are: a
// directory or an https URL, and the tarball's name in it.
type location struct {
	base, name string
	remote     bool
}

func (l location) String() string { return l.base + "/" + l.name }

// locate turns the argument (a version, a tarball path or URL) into the
// tarball's location; a version is this platform's tarball under from.
func locate(arg, from string) (location, error) {
	if versionArg.MatchString(arg) {
		if from == "" {
			return location{}, fmt.Errorf("upgrade: %s is a version: say where its release files are with --from (an https URL or a directory holding SHA256SUMS and the tarballs)", arg)
		}
		arg = strings.TrimSuffix(from, "/") + "/llmgw_" + arg + "_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"
	}
	if strings.Contains(arg, "://") {
		u, err := url.Parse(arg)
		if err != nil {
			return location{}, fmt.Errorf("upgrade: %q: %w", arg, err)
		}
		if u.Scheme != "https" && !(u.Scheme == "http" && loopback(u.Hostname())) {
			return location{}, fmt.Errorf("upgrade: %s: use https:// (plain http only on a loopback address)", arg)
		}
		dir, name := path.Split(u.Path)
		u.Path, u.RawQuery = strings.TrimSuffix(dir, "/"), ""
		return location{base: u.String(), name: name, remote: true}, nil
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return location{}, err
	}
	return location{base: filepath.Dir(abs), name: filepath.Base(abs)}, nil
}

// get reads one file of the location's directory.
func (l location) get(name string, limit int64) ([]byte, error) {
	if !l.remote {
		f, err := os.Open(filepath.Join(l.base, name))
		if err != nil {
			return nil, fmt.Errorf("upgrade: %w (a release's tarball, SHA256SUMS and SHA256SUMS.minisig sit in one directory)", err)
		}
		defer f.Close()
		return readAllLimit(f, limit, name)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Get(l.base + "/" + name)
	if err != nil {
		return nil, fmt.Errorf("upgrade: fetching %s/%s: %w", l.base, name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("upgrade: fetching %s/%s: %s (a release's tarball, SHA256SUMS and SHA256SUMS.minisig sit in one directory)", l.base, name, resp.Status)
	}
	return readAllLimit(resp.Body, limit, l.base+"/"+name)
}

// fetched is a release tarball with its sums and their signature.
type fetched struct {
	loc                location
	tarball, sums, sig []byte
}

func fetchRelease(loc location) (*fetched, error) {
	r := &fetched{loc: loc}
	var err error
	if r.sums, err = loc.get("SHA256SUMS", maxSmall); err != nil {
		return nil, err
	}
	if r.sig, err = loc.get("SHA256SUMS.minisig", maxSmall); err != nil {
		return nil, err
	}
	if r.tarball, err = loc.get(loc.name, maxTarball); err != nil {
		return nil, err
	}
	return r, nil
}

// files is the release as package release reads it.
func (r *fetched) files() release.Files {
	return release.Files{Tarball: r.tarball, Sums: r.sums, Sig: r.sig, Name: r.loc.name, From: r.loc.base}
}

// fetch gets the release src names (a version under --from, a file or an
// URL) and the keys its signature may be by.
func (u *upgrader) fetch(src string) (*fetched, []release.PublicKey, error) {
	keys, err := u.trusted()
	if err != nil {
		return nil, nil, err
	}
	loc, err := locate(src, u.from)
	if err != nil {
		return nil, nil, err
	}
	rel, err := fetchRelease(loc)
	return rel, keys, err
}

// check verifies the signature of the sums, the tarball's sum and its
// binary's platform, and returns the binary (release.Open).
func (r *fetched) check(keys []release.PublicKey) ([]byte, error) {
	bin, err := release.Open(r.files(), keys)
	if err != nil {
		return nil, fmt.Errorf("upgrade: %w", err)
	}
	return bin, nil
}
