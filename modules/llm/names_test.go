package llm

import (
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"m", "gpt-4o-mini", "llama3.2:1b", "Qwen/Qwen2.5-7B", "org/team/name", "a_b.c", strings.Repeat("x", 128)} {
		if err := catalog.CheckName("model name", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for name, want := range map[string]string{
		"":                       "model name is empty",
		"../../x":                `has a ".." part`,
		"./x":                    `has a "." part`,
		"/abs":                   "empty part",
		"a//b":                   "empty part",
		"a/":                     "empty part",
		"a b":                    "has ' '",
		"tab\there":              `has '\t'`,
		"nl\nx":                  `has '\n'`,
		"é":                      "has 'é'",
		strings.Repeat("x", 129): "is 129 bytes long",
	} {
		err := catalog.CheckName("model name", name)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), catalog.NameRule) {
			t.Errorf("%q: got %v, want an error with %q and the rule", name, err, want)
		}
		if err != nil && len(err.Error()) > 400 {
			t.Errorf("%q: the error is %d bytes long", name, len(err.Error()))
		}
	}
}

func TestBounded(t *testing.T) {
	if got := catalog.Bounded("short"); got != `"short"` {
		t.Errorf("got %s", got)
	}
	got := catalog.Bounded(strings.Repeat("é", 1000))
	if len(got) > 100 || !strings.HasSuffix(got, "… (1936 bytes more)") {
		t.Errorf("got %s", got)
	}
}

// A request's model that is no name at all gets no suggestions (no
// distance is computed against a huge string) and a bounded message.
func TestUnknownModelBounded(t *testing.T) {
	c, err := catalog.NewCatalog([]*catalog.Model{{Name: "gpt-4o-mini", Engine: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	a := &App{view: new(atomic.Pointer[view])}
	a.view.Store(&view{cat: c})
	_, err = a.Lookup("gpt-4o-mni")
	if err == nil || !strings.Contains(err.Error(), `did you mean "gpt-4o-mini"?`) {
		t.Errorf("a misspelling: %v", err)
	}
	_, err = a.Lookup(strings.Repeat("g", 10<<20))
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "bytes more") {
		t.Errorf("a huge name: %.300v", err)
	}
}

// BenchmarkLookupHugeName is the cost of the 404 for a request whose model
// is 1 MiB long: it must not compare the string with every catalog name.
func BenchmarkLookupHugeName(b *testing.B) {
	c, err := catalog.NewCatalog([]*catalog.Model{{Name: "gpt-4o-mini", Engine: "sim"}, {Name: "llama3.2:1b", Engine: "sim"}, {Name: "Qwen/Qwen2.5-7B", Engine: "sim"}})
	if err != nil {
		b.Fatal(err)
	}
	a := &App{view: new(atomic.Pointer[view])}
	a.view.Store(&view{cat: c})
	name := strings.Repeat("g", 1<<20)
	for b.Loop() {
		_, _ = a.Lookup(name)
	}
}

// Audit lines cut the values a request supplied.
func TestAuditBounded(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	a := &App{logger: zap.New(core)}
	r := httptest.NewRequest("POST", "/llm/cache/purge", nil)
	r.Header.Set("X-Llmgw-Actor", strings.Repeat("a", 1<<20))
	a.audit(r, "cache purged", zap.String("scope", strings.Repeat("s", 1<<20)))
	for _, f := range logs.All()[0].Context {
		if len(f.String) > catalog.MaxLogValue+40 {
			t.Errorf("%s is %d bytes long in the log", f.Key, len(f.String))
		}
	}
}
