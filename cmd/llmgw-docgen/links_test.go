package main

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// pendingPages are pages of docs/ that other changes add: a link to one
// of them is not checked while the file is missing (once it is there,
// its links and anchors are checked as any other's).
var pendingPages = map[string]bool{
	"docs/releases.md": true,
	"docs/setup.md":    true,
	"docs/ctl.md":      true,
}

var (
	linkRe     = regexp.MustCompile(`!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	autoLinkRe = regexp.MustCompile(`<(https?://[^>\s]+)>`)
	codeSpanRe = regexp.MustCompile("`+[^`]*`+")
	headingRe  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	slugDrop   = regexp.MustCompile(`[^\p{L}\p{N}\p{M} _-]`)
	mdLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// manualFiles lists README.md and every Markdown file under docs/, as
// paths relative to the repository's root.
func manualFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatalf("reading docs/: %v", err)
	}
	return files
}

// proseLines gives the lines of a Markdown file outside fenced code
// blocks, with their line numbers.
func proseLines(text string) map[int]string {
	out := map[int]string{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trim := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trim, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~") {
			fence = trim[:3]
			continue
		}
		out[i+1] = line
	}
	return out
}

// slug is GitHub's anchor for a heading's text: lower case, markup and
// punctuation dropped, spaces made hyphens.
func slug(heading string) string {
	s := mdLinkText.ReplaceAllString(heading, "$1")
	s = strings.ToLower(strings.TrimSpace(s))
	s = slugDrop.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// anchors lists the anchors of a Markdown file's headings, numbered as
// GitHub numbers repeated ones (name, name-1, name-2).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		m := headingRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// TestManualLinks checks every link of README.md and docs/**/*.md: a
// relative link names a file or directory of the repository, an #anchor
// names a heading of its page (as GitHub makes anchors), and an
// http(s) link is a well-formed URL (the network is not asked).
func TestManualLinks(t *testing.T) {
	root := repoRoot(t)
	texts := map[string]string{}
	for _, f := range manualFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(b)
	}
	for f, text := range texts {
		for n, line := range proseLines(text) {
			line = codeSpanRe.ReplaceAllString(line, "")
			for _, target := range linkTargets(line) {
				if msg := checkLink(root, f, target, texts); msg != "" {
					t.Errorf("%s:%d: link %q: %s", f, n, target, msg)
				}
			}
		}
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Keys, tenants and quotas (`llm_quota`)":           "keys-tenants-and-quotas-llm_quota",
		"The agent APIs: Responses and Messages":           "the-agent-apis-responses-and-messages",
		"`llmgw ctl`":                                      "llmgw-ctl",
		"Owners' capacity and the tenancy tree at runtime": "owners-capacity-and-the-tenancy-tree-at-runtime",
		"Prefix-aware routing (`policy prefix_affinity`)":  "prefix-aware-routing-policy-prefix_affinity",
		"[Models](models.md) and engines":                  "models-and-engines",
		"`http.handlers.llm_router`":                       "httphandlersllm_router",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func linkTargets(line string) []string {
	var out []string
	for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
		out = append(out, m[1])
	}
	for _, m := range autoLinkRe.FindAllStringSubmatch(line, -1) {
		out = append(out, m[1])
	}
	return out
}

// checkLink says what is wrong with a link of file f, or "".
func checkLink(root, f, target string, texts map[string]string) string {
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		u, err := url.Parse(target)
		if err != nil || u.Host == "" {
			return "not a well-formed URL"
		}
		return ""
	}
	if strings.HasPrefix(target, "mailto:") {
		return ""
	}
	if strings.Contains(target, "://") {
		return "only http(s) links and paths inside the repository are allowed"
	}
	path, anchor, _ := strings.Cut(target, "#")
	page := f
	if path != "" {
		page = filepath.ToSlash(filepath.Join(filepath.Dir(f), path))
		if strings.HasPrefix(page, "../") {
			return "points outside the repository"
		}
		if _, err := os.Stat(filepath.Join(root, page)); err != nil {
			if pendingPages[page] {
				return ""
			}
			return "no such file: " + page
		}
	}
	if anchor == "" || !strings.HasSuffix(page, ".md") {
		return ""
	}
	text, ok := texts[page]
	if !ok {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			return err.Error()
		}
		text = string(b)
	}
	if !anchors(text)[anchor] {
		return "no heading of " + page + " has the anchor #" + anchor
	}
	return ""
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: run the test from cmd/llmgw-docgen", root)
	}
	return root
}
