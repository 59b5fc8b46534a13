// Command llmgw-docgen writes the configuration reference, docs/reference/,
// from the modules llmgw registers: every field of their JSON config (by
// reflection) with its doc comment and default (from the source), and the
// Caddyfile directives their parsers take (from the source's syntax
// blocks and the cases of their parsers). Run it from the repository's
// root:
//
//	go run ./cmd/llmgw-docgen
//
// A test (TestReferenceUpToDate) fails when docs/reference differs from
// what it would write.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	root := flag.String("root", ".", "the repository's root (where go.mod is)")
	flag.Parse()
	if err := write(*root); err != nil {
		fmt.Fprintln(os.Stderr, "llmgw-docgen:", err)
		os.Exit(1)
	}
}

// write generates the reference into root/docs/reference, removing the
// pages of modules that are gone.
func write(root string) error {
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return fmt.Errorf("no go.mod in %s: run from the repository's root or give -root", root)
	}
	files, err := generate(root)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, refDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	for _, f := range old {
		if _, ok := files[filepath.Base(f)]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("wrote %d files to %s\n", len(files), strings.TrimPrefix(dir, root+"/"))
	return nil
}
