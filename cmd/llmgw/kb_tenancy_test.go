package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// kbTenants are two projects of one team and a project of another team,
// with a key each: alpha-key, beta-key, gamma-key.
func kbTenants() string {
	return fmt.Sprintf(`
		org acme {
			team research {
				project alpha {
					key ka %s
				}
				project beta {
					key kb %s
				}
			}
			team sales {
				project gamma {
					key kg %s
				}
			}
		}`, tenancy.HashKey("alpha-key"), tenancy.HashKey("beta-key"), tenancy.HashKey("gamma-key"))
}

// TestKnowledgeBaseTenancy tries, as another tenant's key, every way to
// reach a project's store, file and passages: each answers 404 as if it
// did not exist. A store shared with its team is read by the team's
// other projects, changed only by the project that made it, and unseen by
// another team.
func TestKnowledgeBaseTenancy(t *testing.T) {
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	q := ""
	g.quota = &q
	g.before = "\t\tllm_kb\n"
	g.writeConfig(kbModels+kbTenants(), "")
	g.start()
	g.waitReady()
	alpha, beta, gamma := keyClient(g, "alpha-key"), keyClient(g, "beta-key"), keyClient(g, "gamma-key")

	secret := kbUpload(t, alpha, "security.html", nil)
	own, err := alpha.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("alpha only"), FileIDs: []string{secret.ID}})
	if err != nil {
		t.Fatal(err)
	}
	kbWaitStore(t, alpha, own.ID)
	if names, _ := kbSearch(t, alpha, own.ID, "stolen laptop", nil); len(names) == 0 {
		t.Fatalf("the owner finds nothing in its own store")
	}
	search := openai.VectorStoreSearchParams{Query: openai.VectorStoreSearchParamsQueryUnion{OfString: openai.String("stolen laptop")}}
	for name, try := range map[string]func(c openai.Client) error{
		"get store":    func(c openai.Client) error { _, err := c.VectorStores.Get(bg, own.ID); return err },
		"search":       func(c openai.Client) error { _, err := c.VectorStores.Search(bg, own.ID, search); return err },
		"delete store": func(c openai.Client) error { _, err := c.VectorStores.Delete(bg, own.ID); return err },
		"list its files": func(c openai.Client) error {
			_, err := c.VectorStores.Files.List(bg, own.ID, openai.VectorStoreFileListParams{})
			return err
		},
		"file content": func(c openai.Client) error { _, err := c.Files.Content(bg, secret.ID); return err },
		"get file":     func(c openai.Client) error { _, err := c.Files.Get(bg, secret.ID); return err },
		"delete file":  func(c openai.Client) error { _, err := c.Files.Delete(bg, secret.ID); return err },
		"file_search": func(c openai.Client) error {
			_, err := c.Responses.New(bg, responses.ResponseNewParams{Model: "sim-chat",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("stolen laptop?")},
				Tools: []responses.ToolUnionParam{{OfFileSearch: &responses.FileSearchToolParam{VectorStoreIDs: []string{own.ID}}}}})
			return err
		},
		"chat header": func(c openai.Client) error {
			_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "sim-chat",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stolen laptop?")}}, option.WithHeader("X-LLMGW-Knowledge", own.ID))
			return err
		},
		"add its file to my store": func(c openai.Client) error {
			mine, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("thief")})
			if err != nil {
				return err
			}
			_, err = c.VectorStores.Files.New(bg, mine.ID, openai.VectorStoreFileNewParams{FileID: secret.ID})
			return err
		},
	} {
		for who, c := range map[string]openai.Client{"beta (same team)": beta, "gamma (other team)": gamma} {
			if err := try(c); apiStatus(err) != http.StatusNotFound {
				t.Errorf("%s, %s of alpha's: want 404, got %v", who, name, err)
			}
		}
	}
	for who, c := range map[string]openai.Client{"beta": beta, "gamma": gamma} {
		page, err := c.VectorStores.List(bg, openai.VectorStoreListParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, vs := range page.Data {
			if vs.ID == own.ID {
				t.Errorf("%s lists alpha's store", who)
			}
		}
	}
	kbCheckShared(t, g, alpha, beta, gamma)
}

// kbCheckShared makes a store shared with alpha's team: beta reads and
// searches it, may not change it; gamma does not see it.
func kbCheckShared(t *testing.T, g *gateway, alpha, beta, gamma openai.Client) {
	doc := kbUpload(t, alpha, "travel-policy.md", nil)
	code, body := kbPost(t, g, "alpha-key", "/v1/vector_stores", fmt.Sprintf(`{"name":"team handbook","share":"team","file_ids":[%q]}`, doc.ID))
	if code != 200 {
		t.Fatalf("a shared store: %d %s", code, body)
	}
	id := between(string(body), `"id":"`, `"`)
	kbWaitStore(t, alpha, id)
	if names, _ := kbSearch(t, beta, id, "hotel limit in London", nil); len(names) == 0 || names[0] != "travel-policy.md" {
		t.Errorf("beta searching the team's store: %v", names)
	}
	if _, err := beta.VectorStores.Delete(bg, id); apiStatus(err) != http.StatusForbidden {
		t.Errorf("beta deleting the team's store: want 403, got %v", err)
	}
	if _, err := gamma.VectorStores.Get(bg, id); apiStatus(err) != http.StatusNotFound {
		t.Errorf("gamma reading research's store: want 404, got %v", err)
	}
	if _, err := beta.Files.Get(bg, doc.ID); apiStatus(err) != http.StatusNotFound {
		t.Errorf("beta reading alpha's file of the shared store: want 404, got %v", err)
	}
}

// kbPost posts JSON with a key.
func kbPost(t *testing.T, g *gateway, key, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", g.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, []byte(b.String())
}

// between is the text of s between the first before and the after that
// follows it.
func between(s, before, after string) string {
	_, rest, ok := strings.Cut(s, before)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, after)
	return v
}

// TestKnowledgeBaseQuota fills a project's kb_bytes and its team's
// kb_files: the upload that would pass either is refused with a 429 that
// names the level, its use and its limit; deleting a file makes room.
func TestKnowledgeBaseQuota(t *testing.T) {
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	q := ""
	g.quota = &q
	g.before = "\t\tllm_kb\n"
	g.writeConfig(kbModels+fmt.Sprintf(`
		org acme {
			team research {
				kb_files 3
				project alpha {
					kb_bytes 1500
					key ka %s
				}
				project beta {
					key kb %s
				}
			}
		}`, tenancy.HashKey("alpha-key"), tenancy.HashKey("beta-key")), "")
	g.start()
	g.waitReady()
	alpha, beta := keyClient(g, "alpha-key"), keyClient(g, "beta-key")
	travel := kbUpload(t, alpha, "travel-policy.md", nil) // 707 bytes
	_, err := alpha.Files.New(bg, openai.FileNewParams{File: mustRead(t, "security.html"), Purpose: openai.FilePurposeAssistants})
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusTooManyRequests || !strings.Contains(e.Message, "project acme/research/alpha") || !strings.Contains(e.Message, "kb_bytes") {
		t.Fatalf("alpha passing its kb_bytes: want a 429 naming the project and kb_bytes, got %v", err)
	}
	kbUpload(t, beta, "onboarding.txt", nil)
	kbUpload(t, beta, "reisekosten.txt", nil)
	_, err = beta.Files.New(bg, openai.FileNewParams{File: mustRead(t, "security.html"), Purpose: openai.FilePurposeAssistants})
	if !errors.As(err, &e) || e.StatusCode != http.StatusTooManyRequests || !strings.Contains(e.Message, "team acme/research holds 3 files") {
		t.Fatalf("the team's fourth file: want a 429 naming the team's kb_files, got %v", err)
	}
	if _, err := alpha.Files.Delete(bg, travel.ID); err != nil {
		t.Fatal(err)
	}
	kbUpload(t, beta, "security.html", nil)

	// An operator's upload into alpha's store counts at alpha's levels too.
	vs, err := alpha.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("alpha")})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := kbAdminUpload(t, g, vs.ID, "travel-policy.md"); code != http.StatusTooManyRequests || !strings.Contains(string(body), "team acme/research holds 3 files") {
		t.Errorf("an operator's upload past the team's kb_files: want 429 naming it, got %d %s", code, body)
	}
}

// kbAdminUpload uploads a file of testdata/kb into a store through the
// admin API.
func kbAdminUpload(t *testing.T, g *gateway, store, name string) (int, []byte) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write(mustReadFile(t, filepath.Join("testdata", "kb", name)))
	mw.Close()
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/llm/kb/stores/%s/files", g.admin, store), &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-Llmgw-Actor", "tests")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
