// Package statefmt keeps an llmgw from reading state a newer llmgw wrote
// in a layout it does not know. What llmgw keeps (in the data directory,
// and a cluster's in its shared store) carries a marker: the layout's
// number and the version of the llmgw that wrote it. An llmgw starts on
// state of its own layout or an older one (and marks it as its own), and
// refuses state of a newer one, saying which version wrote it.
//
// The number changes only when a change to what llmgw stores would make
// an older llmgw misread it, so that an upgrade can be rolled back to any
// release of the same layout.
package statefmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Layout is the number of the layout this llmgw reads and writes.
const Layout = 1

// FileName is the marker's name in the data directory's llmgw folder.
const FileName = "state-format.json"

// Marker is what the marker says.
type Marker struct {
	Layout int `json:"layout"`
	// Version is the llmgw release that last wrote the marker.
	Version string    `json:"version"`
	At      time.Time `json:"at"`
}

// Check returns an error that says what to do when m is from a newer
// layout than this llmgw's; where names the state ("the data directory
// /var/lib/llmgw", "the cluster's store redis://…").
func Check(m Marker, where, version string) error {
	if m.Layout <= Layout {
		return nil
	}
	by := "a newer llmgw"
	if m.Version != "" {
		by = "llmgw " + m.Version
	}
	return fmt.Errorf("the state in %s was written by %s (state layout %d); this llmgw %s reads layout %d at most: "+
		"run %s or a later release (llmgw upgrade), or point this one at a data directory of its own",
		where, by, m.Layout, version, Layout, orLater(m.Version))
}

func orLater(v string) string {
	if v == "" {
		return "the newer llmgw"
	}
	return v
}

// Mine is the marker this llmgw writes.
func Mine(version string) Marker {
	return Marker{Layout: Layout, Version: version, At: time.Now().UTC()}
}

// CheckDir checks the marker in the data directory dir (under llmgw/)
// and, when it is missing or older, writes this llmgw's. It is called
// with the data directory's lock held.
func CheckDir(dir, version string) error {
	path := filepath.Join(dir, "llmgw", FileName)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("reading the state marker: %w", err)
	default:
		var m Marker
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("the state marker %s is not JSON (%v): restore it, or remove it if this data directory was never used by a newer llmgw", path, err)
		}
		if err := Check(m, "the data directory "+dir, version); err != nil {
			return err
		}
		if m.Layout == Layout && m.Version == version {
			return nil
		}
	}
	return write(path, Mine(version))
}

// write replaces the marker at path (written beside, then renamed).
func write(path string, m Marker) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("writing the state marker: %w", err)
	}
	b, _ := json.Marshal(m)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the state marker: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the state marker: %w", err)
	}
	return nil
}
