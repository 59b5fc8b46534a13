package mirror

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/zeebo/blake3"
)

// Manifest describes one stored model version.
type Manifest struct {
	Model   string `json:"model"`
	Version string `json:"version"`
	// Format is gguf, safetensors or other, from the files' names.
	Format string    `json:"format"`
	Files  []File    `json:"files"`
	Origin Origin    `json:"origin"`
	Added  time.Time `json:"added"`
	// AllowPickle records that pickle files were allowed in.
	AllowPickle bool `json:"allow_pickle,omitempty"`
}

// File is one file of a version.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// BLAKE3 is the file's BLAKE3-256 sum, taken in the same pass as its
	// SHA-256 when it was first stored. Fetches and checks use it: it is
	// as hard to forge and twice as fast on one core. Manifests written
	// before it existed lack it, and their files are checked by SHA-256.
	BLAKE3 string `json:"blake3,omitempty"`
}

// checker returns the hash a copy of f is checked with, the sum it must
// give and the hash's name for messages.
func (f File) checker() (hash.Hash, string, string) {
	if f.BLAKE3 != "" {
		return blake3.New(), f.BLAKE3, "blake3"
	}
	return sha256.New(), f.SHA256, "sha256"
}

// sums takes a file's SHA-256 and BLAKE3 in one pass.
type sums struct{ sha, b3 hash.Hash }

func newSums() *sums { return &sums{sha256.New(), blake3.New()} }

func (s *sums) Write(p []byte) (int, error) {
	s.sha.Write(p)
	return s.b3.Write(p)
}

func (s *sums) hex() (sha, b3 string) {
	return hex.EncodeToString(s.sha.Sum(nil)), hex.EncodeToString(s.b3.Sum(nil))
}

// Origin says where a version came from.
type Origin struct {
	// Source as the user gave it (URL, hf:// reference or local path).
	Source string `json:"source"`
	// Repository, Revision and Commit are set for registry sources.
	Repository string `json:"repository,omitempty"`
	Revision   string `json:"revision,omitempty"`
	Commit     string `json:"commit,omitempty"`
	Registry   string `json:"registry,omitempty"`
}

// Size is the version's total size.
func (m *Manifest) Size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// Tombstone records that a version was removed, so that no store copies it
// back from another.
type Tombstone struct {
	Model   string    `json:"model"`
	Version string    `json:"version"`
	Removed time.Time `json:"removed"`
	By      string    `json:"by,omitempty"`
}

// Track follows a registry repository for a model: which version is
// current and which was before, for update and rollback.
type Track struct {
	Model    string    `json:"model"`
	Source   string    `json:"source"`
	Current  string    `json:"current"`
	Previous string    `json:"previous,omitempty"`
	Updated  time.Time `json:"updated"`
}

// The layout of a store.
func versionPrefix(model, version string) string { return "models/" + model + "/" + version + "/" }
func manifestKey(model, version string) string {
	return versionPrefix(model, version) + "manifest.json"
}
func fileKey(model, version, p string) string { return versionPrefix(model, version) + "files/" + p }
func tombKey(model, version string) string    { return "tombstones/" + model + "/" + version + ".json" }
func trackKey(model string) string            { return "tracks/" + model + ".json" }

// parseManifestKey splits models/<model>/<version>/manifest.json.
func parseManifestKey(key string) (model, version string, ok bool) {
	rest, ok := strings.CutPrefix(key, "models/")
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[2] != "manifest.json" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// CheckName checks a model or version name: letters, digits, '.', '_',
// '-' and ':', not starting with '.'.
func CheckName(kind, name string) error {
	if name == "" {
		return fmt.Errorf("%s name is empty", kind)
	}
	if name[0] == '.' {
		return fmt.Errorf("%s name %q must not start with '.'", kind, name)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return fmt.Errorf("%s name %q may hold only letters, digits, '.', '_', '-' and ':'", kind, name)
		}
	}
	return nil
}

// NameFor turns any name (a catalog model's) into one CheckName accepts:
// other characters become '_'.
func NameFor(name string) string {
	b := []byte(strings.TrimLeft(name, "."))
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '_'
		}
	}
	return string(b)
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':'
}

// checkPath checks a file's path within a version.
func checkPath(p string) error {
	if p == "" || path.Clean(p) != p || strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("file path %q must be relative and clean", p)
	}
	return nil
}

// pickleExts are formats that run code when loaded.
var pickleExts = []string{".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle"}

// isPickle says whether a file's name marks a pickle format.
func isPickle(p string) bool {
	ext := strings.ToLower(path.Ext(p))
	for _, e := range pickleExts {
		if ext == e {
			return true
		}
	}
	return false
}

// formatOf names a version's weight format from its files.
func formatOf(files []File) string {
	format := "other"
	for _, f := range files {
		switch strings.ToLower(path.Ext(f.Path)) {
		case ".gguf":
			return "gguf"
		case ".safetensors":
			format = "safetensors"
		}
	}
	return format
}

// contentVersion names a version after its contents: the first 12 hex
// digits of a hash over its files' paths, sizes and sums. Adding the same
// bytes twice gives the same version.
func contentVersion(files []File) string {
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	h := sha256.New()
	for _, f := range sorted {
		fmt.Fprintf(h, "%s %d %s\n", f.Path, f.Size, f.SHA256)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
