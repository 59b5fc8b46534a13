package llmquota

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// A memory store's usage outlives the store: saved when it is let go,
// loaded by the next one on the same storage; nothing is written while
// nothing changed, and a damaged file is an error that says what to do.
func TestUsageSavedInStorage(t *testing.T) {
	dir := t.TempDir()
	storage := &certmagic.FileStorage{Path: dir}
	key := tenancy.Level{Kind: "key", Name: "k"}
	at := time.Date(2026, 5, 1, 12, 30, 0, 0, time.UTC)
	m := newMemoryStore()
	if err := m.persistUsage(storage, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		a := testAdmission(1, key)
		a.model, a.now = "chat", at
		if d, _ := m.admit(t.Context(), a); !d.ok {
			t.Fatalf("refused: %+v", d)
		}
		_ = m.settle(t.Context(), &settlement{adm: a, prompt: 5, completion: 7, costMicros: 11})
	}
	_ = m.Destruct()

	again := newMemoryStore()
	defer again.Destruct()
	if err := again.persistUsage(storage, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	u, _ := again.ReadUsage(key.Node(), at, at)
	if u["chat"] == nil || u["chat"].Requests != 3 || u["chat"].InputTokens != 15 || u["chat"].OutputTokens != 21 || u["chat"].CostMicros != 33 {
		t.Errorf("after a restart: %+v, want 3 requests, 15 in, 21 out, cost 33", u["chat"])
	}
	file := filepath.Join(dir, filepath.FromSlash(usageKey))
	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	again.saveUsage() // unchanged: not written
	third := newMemoryStore()
	defer third.Destruct()
	err := third.persistUsage(storage, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), "move the file away to start again") {
		t.Errorf("a damaged file: %v", err)
	}
}
