package release

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
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
)

// ProjectKey is the minisign public key llmgw's releases are signed with
// (deploy/release.pub, which a test compares with it).
const ProjectKey = "RWTe9hyop62mNMFsqE3i53Wq+kavd6HpLB7BqIHJIdTNMilin+9bO1t1"

// Files are a release tarball, the SHA256SUMS that lists it and the
// signature of those sums; Name is the tarball's name in the sums, From
// where they came from (for errors).
type Files struct {
	Tarball, Sums, Sig []byte
	Name, From         string
}

// MaxTarball bounds a release tarball (they are tens of MB).
const MaxTarball = 1 << 30

// Check verifies the signature of the sums with keys and the tarball's
// sum in them.
func Check(f Files, keys []PublicKey) error {
	sig, err := ParseSignature(f.Sig)
	if err != nil {
		return fmt.Errorf("%s/SHA256SUMS.minisig: %w", f.From, err)
	}
	if err := Verify(f.Sums, sig, keys...); err != nil {
		return fmt.Errorf("refused: SHA256SUMS of %s: %w; nothing was changed", f.From, err)
	}
	sum := sha256.Sum256(f.Tarball)
	want, ok := sumOf(f.Sums, f.Name)
	if !ok {
		return fmt.Errorf("refused: %s is not in the signed SHA256SUMS; nothing was changed", f.Name)
	}
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("refused: %s/%s has SHA-256 %s, the signed SHA256SUMS says %s (damaged or changed); nothing was changed", f.From, f.Name, got, want)
	}
	return nil
}

// Open checks the release (Check) and its binary's platform (this
// machine's), and returns the binary.
func Open(f Files, keys []PublicKey) ([]byte, error) {
	if err := Check(f, keys); err != nil {
		return nil, err
	}
	bin, err := binaryOf(f.Tarball)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	if p := PlatformOf(bin); p != runtime.GOOS+"/"+runtime.GOARCH {
		return nil, fmt.Errorf("refused: the binary of %s is for %s, this machine is %s/%s; take the llmgw_<version>_%s_%s tarball; nothing was changed",
			f.Name, p, runtime.GOOS, runtime.GOARCH, runtime.GOOS, runtime.GOARCH)
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
			b, err := io.ReadAll(io.LimitReader(tr, MaxTarball+1))
			if err == nil && len(b) > MaxTarball {
				err = fmt.Errorf("larger than %d bytes", MaxTarball)
			}
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", h.Name, err)
			}
			return b, nil
		}
	}
}

// PlatformOf names a binary's os/arch from its header.
func PlatformOf(bin []byte) string {
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

// Replace puts newBin at bin atomically: written beside it, synced,
// then renamed over it; the old binary is copied to bin.previous first.
// The running process keeps its old file (the rename leaves it without a
// name), so restarting it runs the new one from the same path.
func Replace(bin string, newBin []byte) error {
	fi, err := os.Stat(bin)
	if err != nil {
		return fmt.Errorf("upgrade: the binary to replace: %w", err)
	}
	tmp, err := writeBeside(bin, ".upgrade", fi.Mode().Perm(), func(w io.Writer) error {
		_, err := w.Write(newBin)
		return err
	})
	if err != nil {
		return err
	}
	if err := copyFile(bin, bin+".previous", fi.Mode().Perm()); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return writeErr(bin, err)
	}
	return syncDir(filepath.Dir(bin))
}

// Rollback swaps bin and bin.previous.
func Rollback(bin string) error {
	prev := bin + ".previous"
	fi, err := os.Stat(prev)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("upgrade: --rollback: no %s to go back to (llmgw upgrade keeps the binary it replaces there)", prev)
	}
	if err != nil {
		return fmt.Errorf("upgrade: --rollback: %w", err)
	}
	tmp, err := writeBeside(bin, ".rollback", fi.Mode().Perm(), func(w io.Writer) error {
		return copyInto(w, bin)
	})
	if err != nil {
		return err
	}
	if err := os.Rename(prev, bin); err != nil {
		os.Remove(tmp)
		return writeErr(bin, err)
	}
	if err := os.Rename(tmp, prev); err != nil {
		return fmt.Errorf("upgrade: --rollback: %s is back, but keeping the binary it replaced as %s failed (%w); that binary is at %s", bin, prev, err, tmp)
	}
	return syncDir(filepath.Dir(bin))
}

// copyFile copies src to dst through a synced file renamed into place.
func copyFile(src, dst string, mode fs.FileMode) error {
	tmp, err := writeBeside(dst, ".tmp", mode, func(w io.Writer) error { return copyInto(w, src) })
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return writeErr(dst, err)
	}
	return nil
}

func copyInto(w io.Writer, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// writeBeside writes a new file next to path (path + suffix + random),
// with mode, synced and closed, and returns its name.
func writeBeside(path, suffix string, mode fs.FileMode, write func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+suffix+"-*")
	if err != nil {
		return "", writeErr(path, err)
	}
	err = write(f)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", writeErr(path, err)
	}
	return f.Name(), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil // the rename is done; a directory that cannot be opened cannot be synced either
	}
	defer d.Close()
	_ = d.Sync()
	return nil
}

// writeErr says what to do when the binary's directory is not writable.
func writeErr(path string, err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("upgrade: no permission to write beside %s (%v): run with sudo, or as the user that owns it; nothing was changed", path, err)
	}
	return fmt.Errorf("upgrade: writing beside %s: %w", path, err)
}

// VersionOf is the version in a release tarball's name
// (llmgw_<version>_<os>_<arch>.tar.gz), which the signed sums list.
func VersionOf(name string) string {
	v := strings.TrimSuffix(strings.TrimPrefix(name, "llmgw_"), ".tar.gz")
	for range 2 { // _<arch>, then _<os>
		if i := strings.LastIndexByte(v, '_'); i > 0 {
			v = v[:i]
		}
	}
	return v
}
