package setup

import (
	"fmt"
	"net/url"
	"strings"
)

// interview asks a person what the flags did not say. given says
// whether any of the named flags was given: that question is not asked.
func interview(p *prompter, a *setupAnswers, m machine, given func(...string) bool) error {
	steps := []func(*prompter, *setupAnswers, machine, func(...string) bool) error{
		askSite, askModels, askKeys, askMirror, askCluster, askConsole, askUnits,
	}
	for _, s := range steps {
		if err := s(p, a, m, given); err != nil {
			return err
		}
	}
	return nil
}

func askSite(p *prompter, a *setupAnswers, _ machine, given func(...string) bool) error {
	if given("listen") {
		return nil
	}
	p.section("Site", "Where clients reach the OpenAI-compatible API (/v1). A port such as :8080 serves\nplain HTTP on every address; a host name such as gw.example.com serves HTTPS on 443\nwith a certificate Caddy obtains (the console's sign-in cookie needs HTTPS beyond localhost).")
	v, err := p.ask("Address", a.Listen, func(v string) error { return checkListen("the address", v) })
	a.Listen = v
	return err
}

func askModels(p *prompter, a *setupAnswers, m machine, given func(...string) bool) error {
	if given("models", "ollama-models", "provider") {
		return nil
	}
	p.section("Models and engines", "llmgw starts models through engines (sim, Ollama, llama.cpp, vLLM) or forwards to an\noutside provider. The sim model is a simulator for demos and load tests, not inference.")
	var err error
	if a.Sim, err = p.yes("Serve the sim demo model (sim-chat)?", a.Sim); err != nil {
		return err
	}
	if m.Ollama && len(m.OllamaModels) > 0 {
		use, err := p.yes(fmt.Sprintf("Serve the models of the Ollama server at %s (%s)?", a.OllamaURL, strings.Join(m.OllamaModels, ", ")), len(a.OllamaModels) > 0 || !a.rerun)
		if err != nil {
			return err
		}
		a.OllamaModels = nil
		if use {
			a.OllamaModels = m.OllamaModels
		}
	}
	kind, err := p.ask("An outside provider: openai (any OpenAI-compatible API), anthropic, or none", orNone(a.ProviderKind), optional(func(v string) error {
		return checkProvider(&setupAnswers{ProviderKind: v, ProviderURL: "https://x", ProviderModel: "m", ProviderKey: "K"})
	}))
	if a.ProviderKind = none(kind); err != nil || a.ProviderKind == "" {
		return err
	}
	providerDefaults(a)
	return askProvider(p, a)
}

func askProvider(p *prompter, a *setupAnswers) error {
	var err error
	if a.ProviderURL, err = p.ask("  its API root", a.ProviderURL, func(v string) error {
		c := *a
		c.ProviderURL = v
		return checkProvider(&c)
	}); err != nil {
		return err
	}
	if a.ProviderModel, err = p.ask("  the provider's model to serve", a.ProviderModel, func(v string) error {
		c := *a
		c.ProviderModel = v
		return checkProvider(&c)
	}); err != nil {
		return err
	}
	fmt.Fprintln(p.out, "  The key itself is not asked: it goes in llmgw.env, read from an environment variable.")
	a.ProviderKey, err = p.ask("  the variable that holds its API key", a.ProviderKey, func(v string) error { return checkEnvName("the variable", v) })
	return err
}

func askKeys(p *prompter, a *setupAnswers, _ machine, given func(...string) bool) error {
	if given("key", "tenant", "key-id") {
		return nil
	}
	p.section("Keys and tenants", "Callers send an API key; each key belongs to a project of a team of an organisation,\nwhose limits (requests, tokens, budget) apply to it. Without keys anyone who reaches the\nsite may call every model. The key is made now and shown once; only its SHA-256 is kept.")
	var err error
	if a.Key, err = p.yes("Make a first API key?", a.Key); err != nil || !a.Key {
		return err
	}
	a.Tenant, err = p.ask("  its organisation/team/project", a.Tenant, func(v string) error {
		c := *a
		c.Tenant = v
		return checkTenant(&c)
	})
	return err
}

func askMirror(p *prompter, a *setupAnswers, _ machine, given func(...string) bool) error {
	if given("mirror-dir", "s3-endpoint", "s3-bucket") {
		return nil
	}
	p.section("Weights mirror", "Model weights (hf://, URLs, local files) kept checksummed in one or two stores, a\ndirectory or S3, that nodes fetch from. Without one, weights go under the data directory.")
	use, err := p.yes("Set up a mirror?", a.MirrorDir != "" || a.S3Bucket != "")
	if err != nil || !use {
		a.MirrorDir, a.S3Endpoint, a.S3Bucket = "", "", ""
		return err
	}
	dir, err := p.ask("  a directory store (an absolute path, or none)", orNone(a.MirrorDir), optional(func(v string) error { return checkMirror(&setupAnswers{MirrorDir: v}) }))
	if a.MirrorDir = none(dir); err != nil {
		return err
	}
	s3, err := p.yes("  an S3 store?", a.S3Bucket != "")
	if err != nil || !s3 {
		a.S3Endpoint, a.S3Bucket = "", ""
		return err
	}
	return askS3(p, a)
}

func askS3(p *prompter, a *setupAnswers) error {
	var err error
	if a.S3Endpoint, err = p.ask("  its endpoint, host:port", a.S3Endpoint, func(v string) error {
		if v == "" || strings.Contains(v, "://") {
			return fmt.Errorf("give host or host:port without a scheme, such as s3.internal:9000 or s3.amazonaws.com")
		}
		return nil
	}); err != nil {
		return err
	}
	if a.S3TLS, err = p.yes("  over HTTPS?", a.S3TLS || !strings.Contains(a.S3Endpoint, ":")); err != nil {
		return err
	}
	if a.S3Bucket, err = p.ask("  its bucket", a.S3Bucket, func(v string) error {
		if v == "" {
			return fmt.Errorf("give the bucket's name")
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintln(p.out, "  Its credentials are not asked: they go in llmgw.env, read from environment variables.")
	if a.S3KeyEnv, err = p.ask("  the variable of its access key", a.S3KeyEnv, func(v string) error { return checkEnvName("the variable", v) }); err != nil {
		return err
	}
	a.S3SecretEnv, err = p.ask("  the variable of its secret key", a.S3SecretEnv, func(v string) error { return checkEnvName("the variable", v) })
	return err
}

// orNone shows an empty default as "none".
func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

// providerDefaults fills what a provider kind implies.
func providerDefaults(a *setupAnswers) {
	d := map[string][3]string{
		"openai":    {"https://api.openai.com/v1", "gpt-4o-mini", "OPENAI_API_KEY"},
		"anthropic": {"https://api.anthropic.com/v1", "claude-sonnet-4-5", "ANTHROPIC_API_KEY"},
	}[a.ProviderKind]
	if u, err := url.Parse(a.ProviderURL); a.ProviderURL == "" || err != nil {
		a.ProviderURL = d[0]
	} else if a.ProviderKind == "anthropic" && u.Host == "api.openai.com" {
		a.ProviderURL = d[0]
	}
	if a.ProviderModel == "" {
		a.ProviderModel = d[1]
	}
	if a.ProviderKey == "" {
		a.ProviderKey = d[2]
	}
}
