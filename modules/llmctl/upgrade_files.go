package llmctl

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/llmgw/llmgw/modules/llmctl/release"
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

// check verifies the signature of the sums, the tarball's sum and its
// binary's platform, and returns the binary.
func (r *fetched) check(keys []release.PublicKey) ([]byte, error) {
	sig, err := release.ParseSignature(r.sig)
	if err != nil {
		return nil, fmt.Errorf("upgrade: %s/SHA256SUMS.minisig: %w", r.loc.base, err)
	}
	if err := release.Verify(r.sums, sig, keys...); err != nil {
		return nil, fmt.Errorf("upgrade: refused: SHA256SUMS of %s: %w; nothing was changed", r.loc.base, err)
	}
	sum := sha256.Sum256(r.tarball)
	want, ok := sumOf(r.sums, r.loc.name)
	if !ok {
		return nil, fmt.Errorf("upgrade: refused: %s is not in the signed SHA256SUMS; nothing was changed", r.loc.name)
	}
	if got := hex.EncodeToString(sum[:]); got != want {
		return nil, fmt.Errorf("upgrade: refused: %s has SHA-256 %s, the signed SHA256SUMS says %s (damaged or changed); nothing was changed", r.loc, got, want)
	}
	bin, err := binaryOf(r.tarball)
	if err != nil {
		return nil, fmt.Errorf("upgrade: %s: %w", r.loc.name, err)
	}
	if p := platformOf(bin); p != runtime.GOOS+"/"+runtime.GOARCH {
		return nil, fmt.Errorf("upgrade: refused: the binary of %s is for %s, this machine is %s/%s; take the llmgw_<version>_%s_%s tarball; nothing was changed",
			r.loc.name, p, runtime.GOOS, runtime.GOARCH, runtime.GOOS, runtime.GOARCH)
	}
	return bin, nil
}

// sumOf finds name's hex SHA-256 in a sha256sum listing.
func sumOf(sums []byte, name string) (string, bool) {
	for _, line := range strings.Split(string(sums), "\n") {
		if f := strings.Fields(line); len(f) == 2 && strings.TrimPrefix(f[1], "*") == name {
			return strings.ToLower(f[0]), true
		}
	}
	return "", false
}

// binaryOf is the llmgw binary of a release tarball (<top dir>/llmgw).
func binaryOf(tgz []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("not a gzip tarball: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no llmgw binary in it (want llmgw_<version>_<os>_<arch>/llmgw)")
		}
		if err != nil {
			return nil, fmt.Errorf("reading the tarball: %w", err)
		}
		if dir, file := path.Split(h.Name); file == "llmgw" && strings.Count(dir, "/") == 1 && h.Typeflag == tar.TypeReg {
			return readAllLimit(tr, maxTarball, h.Name)
		}
	}
}

// platformOf names a binary's os/arch from its header.
func platformOf(bin []byte) string {
	if f, err := elf.NewFile(bytes.NewReader(bin)); err == nil {
		arch := map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64", elf.EM_386: "386", elf.EM_ARM: "arm"}[f.Machine]
		return "linux/" + cmp.Or(arch, f.Machine.String())
	}
	if f, err := macho.NewFile(bytes.NewReader(bin)); err == nil {
		arch := map[macho.Cpu]string{macho.CpuAmd64: "amd64", macho.CpuArm64: "arm64"}[f.Cpu]
		return "darwin/" + cmp.Or(arch, f.Cpu.String())
	}
	return "an unknown platform (not an ELF or Mach-O executable)"
}
