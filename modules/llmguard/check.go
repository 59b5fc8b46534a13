package llmguard

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// Stage is where a check looks: the request's text or the answer's.
type Stage string

const (
	Input  Stage = "input"
	Output Stage = "output"
)

// Action is what a finding leads to.
type Action string

const (
	Block  Action = "block"  // refuse the prompt, or cut the answer
	Redact Action = "redact" // replace the value (input: a placeholder put back in the answer)
	Log    Action = "log"    // record it and let it through
)

func parseAction(s string) (Action, error) {
	switch a := Action(s); a {
	case Block, Redact, Log:
		return a, nil
	}
	return "", fmt.Errorf("action %q: use block, redact or log", s)
}

// Outcomes of one check on one request, as logged and counted.
const (
	Passed   = "passed"
	Redacted = "redacted"
	Blocked  = "blocked"
	Flagged  = "flagged" // found something whose action is log
	Skipped  = "skipped"
	Errored  = "errored"
)

// Check is a guest module in http.llm_guardrails.checks.*: it looks at
// texts and says what it found. Checks embed Scope, which says where and
// for whom they run and what their findings lead to.
type Check interface {
	CheckScope() *Scope
	// Inspect looks at the texts of one stage. For output, in.Prompt
	// holds the input texts.
	Inspect(ctx context.Context, in *Inspection) ([]Finding, error)
}

// Incremental is implemented by checks that can look at a stream piece by
// piece (a bounded window of recent text). Others need the whole answer
// and are skipped on streamed output, which is recorded.
type Incremental interface {
	Incremental() bool
}

// Inspection is what a check is given.
type Inspection struct {
	Stage  Stage
	Model  string
	Texts  []string
	Prompt []string
}

// Finding is one thing a check found.
type Finding struct {
	Text       int    // index into Inspection.Texts; -1 for all of them (a verdict)
	Start, End int    // bytes within the text; both 0 with Text -1
	Kind       string // EMAIL, CARD, a pattern's or category's name
	Action     Action
	// Replacement, when set, replaces the span instead of a placeholder
	// (and is not put back in the answer).
	Replacement string
	Detail      string // for messages: the judge's categories, a reason
}

// Scope is the part of every check's configuration that the handler
// reads: its name, where it runs, its action, and for which models and
// tenants.
type Scope struct {
	// Name names the check in errors, logs and metrics. Default: its
	// module name (pii, regex, judge, webhook).
	Name string `json:"name,omitempty"`
	// On is input, output or both. Default: both (judge and webhook:
	// input).
	On []Stage `json:"on,omitempty"`
	// Action for findings: block, redact or log. Default: block (pii:
	// redact).
	Action Action `json:"action,omitempty"`
	// Models the check runs for: catalog names or globs. Default: all.
	Models []string `json:"models,omitempty"`
	// Tenants the check runs for, when llm_quota runs before it:
	// "org", "org/team", "org/team/project" or "key:<id>". Default: all
	// callers, with or without a tenant.
	Tenants []string `json:"tenants,omitempty"`
	// Timeout bounds checks that call out (judge, webhook). Default 2s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// OnError is what a failed check means: allow (record errored, go on)
	// or deny (block). Default: deny for judge and webhook.
	OnError string `json:"on_error,omitempty"`

	metrics *checkMetrics
}

// CheckScope returns the check's scope, for the handler.
func (s *Scope) CheckScope() *Scope { return s }

func (s *Scope) defaults(name string, stages []Stage, action Action) error {
	s.metrics = new(checkMetrics)
	if s.Name == "" {
		s.Name = name
	}
	if len(s.On) == 0 {
		s.On = stages
	}
	for _, st := range s.On {
		if st != Input && st != Output {
			return fmt.Errorf("check %s: on %q: use input and/or output", s.Name, st)
		}
	}
	if s.Action == "" {
		s.Action = action
	}
	if _, err := parseAction(string(s.Action)); err != nil {
		return fmt.Errorf("check %s: %w", s.Name, err)
	}
	for _, g := range s.Models {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("check %s: models %q: %w", s.Name, g, err)
		}
	}
	if s.Timeout == 0 {
		s.Timeout = caddy.Duration(2 * time.Second)
	}
	switch s.OnError {
	case "":
		s.OnError = "deny"
	case "allow", "deny":
	default:
		return fmt.Errorf("check %s: on_error %q: use allow or deny", s.Name, s.OnError)
	}
	return nil
}

func (s *Scope) runsOn(st Stage) bool { return slices.Contains(s.On, st) }

// applies says whether the check runs for a model and tenant, and why not.
func (s *Scope) applies(model string, t *tenancy.Tenant) (bool, string) {
	if len(s.Models) > 0 {
		ok := false
		for _, g := range s.Models {
			if m, _ := path.Match(g, model); m {
				ok = true
				break
			}
		}
		if !ok {
			return false, "model " + model + " not in its models"
		}
	}
	if len(s.Tenants) > 0 {
		if t == nil {
			return false, "no tenant: llm_quota did not run before llm_guardrails"
		}
		for _, want := range s.Tenants {
			if tenantMatches(want, t) {
				return true, ""
			}
		}
		return false, "tenant not in its tenants"
	}
	return true, ""
}

func tenantMatches(want string, t *tenancy.Tenant) bool {
	if id, ok := strings.CutPrefix(want, "key:"); ok {
		return id == t.KeyID
	}
	parts := strings.Split(want, "/")
	have := []string{t.Org, t.Team, t.Project}
	if len(parts) > len(have) {
		return false
	}
	for i, p := range parts {
		if p != have[i] {
			return false
		}
	}
	return true
}
