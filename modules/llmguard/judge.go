package llmguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/openai"
)

func init() {
	caddy.RegisterModule(Judge{})
	caddy.RegisterModule(Webhook{})
}

// outClient calls guard models and outside services.
var outClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32, IdleConnTimeout: 90 * time.Second}}

// Judge asks a guard model whether the prompt (or the exchange, on
// output) is safe: a catalog model through the llm app, or an outside
// OpenAI-compatible endpoint. It understands Llama Guard style verdicts
// ("safe", or "unsafe" and a line of categories such as "S1,S10") and
// JSON ones ({"safe": false, "categories": [...]}, {"flagged": true},
// {"verdict": "unsafe"}). Its action is block or log; a verdict it cannot
// read, a timeout or an error count as the check failing, which on_error
// turns into allow or deny.
type Judge struct {
	Scope
	// Model is the guard model: a catalog model, or with Endpoint the
	// name the endpoint knows it by.
	Model string `json:"model"`
	// Endpoint is the base URL of an outside OpenAI-compatible API (up
	// to /v1). Default: the catalog model through the llm app.
	Endpoint string `json:"endpoint,omitempty"`
	// APIKey for Endpoint, sent as a bearer token; {env.X} placeholders
	// work.
	APIKey string `json:"api_key,omitempty"`
	// Categories that block (or log); others count as safe. Default: any
	// unsafe verdict.
	Categories []string `json:"categories,omitempty"`
	// System is an instruction sent first, for guard models that want one.
	System string `json:"system,omitempty"`

	app *llm.App
	key string
}

// CaddyModule returns the Caddy module information.
func (Judge) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.llm_guardrails.checks.judge", New: func() caddy.Module { return new(Judge) }}
}

// Provision checks the configuration.
func (j *Judge) Provision(ctx caddy.Context) error {
	if err := j.defaults("judge", []Stage{Input}, Block); err != nil {
		return err
	}
	if j.Action == Redact {
		return fmt.Errorf("check %s: a verdict cannot be redacted; use block or log", j.Name)
	}
	if j.Model == "" {
		return fmt.Errorf("check %s: no model; name the guard model (a catalog model, or with endpoint the endpoint's model)", j.Name)
	}
	j.key = caddy.NewReplacer().ReplaceAll(j.APIKey, "")
	if j.Endpoint != "" {
		j.Endpoint = strings.TrimRight(j.Endpoint, "/")
		return nil
	}
	a, err := ctx.App("llm")
	if err != nil {
		return fmt.Errorf("check %s: %w", j.Name, err)
	}
	j.app = a.(*llm.App)
	if _, err := j.app.Lookup(j.Model); err != nil {
		return fmt.Errorf("check %s: guard model: %w", j.Name, err)
	}
	return nil
}

// Inspect asks the guard model for a verdict.
func (j *Judge) Inspect(ctx context.Context, in *Inspection) ([]Finding, error) {
	var msgs []llm.ChatMessage
	if j.System != "" {
		msgs = append(msgs, llm.ChatMessage{Role: "system", Content: j.System})
	}
	if in.Stage == Input {
		msgs = append(msgs, llm.ChatMessage{Role: "user", Content: strings.Join(in.Texts, "\n\n")})
	} else {
		msgs = append(msgs, llm.ChatMessage{Role: "user", Content: strings.Join(in.Prompt, "\n\n")},
			llm.ChatMessage{Role: "assistant", Content: strings.Join(in.Texts, "\n\n")})
	}
	var answer string
	var err error
	if j.Endpoint == "" {
		answer, err = j.app.Chat(ctx, j.Model, msgs, 32)
	} else {
		answer, err = j.remote(ctx, msgs)
	}
	if err != nil {
		return nil, err
	}
	unsafe, cats, err := parseVerdict(answer)
	if err != nil {
		return nil, err
	}
	if !unsafe {
		return nil, nil
	}
	if len(j.Categories) > 0 {
		var hit []string
		for _, c := range cats {
			for _, want := range j.Categories {
				if strings.EqualFold(c, want) {
					hit = append(hit, c)
				}
			}
		}
		if len(hit) == 0 {
			return nil, nil
		}
		cats = hit
	}
	detail := "judged unsafe"
	if len(cats) > 0 {
		detail += ": " + strings.Join(cats, ", ")
	}
	return []Finding{{Text: -1, Kind: "UNSAFE", Action: j.Action, Detail: detail}}, nil
}

func (j *Judge) remote(ctx context.Context, msgs []llm.ChatMessage) (string, error) {
	body, _ := json.Marshal(map[string]any{"model": j.Model, "messages": msgs, "max_tokens": 32, "temperature": 0})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.Endpoint+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if j.key != "" {
		req.Header.Set("Authorization", "Bearer "+j.key)
	}
	var out openai.ChatAnswer
	if err := doJSON(req, &out); err != nil {
		return "", fmt.Errorf("asking %s: %w", j.Endpoint, err)
	}
	text, err := out.Content()
	if err != nil {
		return "", fmt.Errorf("asking %s: %w", j.Endpoint, err)
	}
	return text, nil
}

// parseVerdict reads a guard model's answer.
func parseVerdict(s string) (unsafe bool, categories []string, err error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") {
		var v struct {
			Safe       *bool           `json:"safe"`
			Flagged    *bool           `json:"flagged"`
			Verdict    string          `json:"verdict"`
			Categories json.RawMessage `json:"categories"`
		}
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return false, nil, fmt.Errorf("the guard model's verdict is not valid JSON: %v", err)
		}
		switch {
		case v.Safe != nil:
			unsafe = !*v.Safe
		case v.Flagged != nil:
			unsafe = *v.Flagged
		case v.Verdict != "":
			unsafe = strings.EqualFold(v.Verdict, "unsafe")
			if !unsafe && !strings.EqualFold(v.Verdict, "safe") {
				return false, nil, fmt.Errorf("the guard model's verdict %q is neither safe nor unsafe", v.Verdict)
			}
		default:
			return false, nil, fmt.Errorf("the guard model's JSON verdict has no safe, flagged or verdict field: %s", clip(s))
		}
		var list []string
		if json.Unmarshal(v.Categories, &list) == nil {
			categories = list
		} else {
			var one string
			if json.Unmarshal(v.Categories, &one) == nil && one != "" {
				categories = splitCategories(one)
			}
		}
		return unsafe, categories, nil
	}
	first, rest, _ := strings.Cut(s, "\n")
	switch strings.ToLower(strings.TrimSpace(first)) {
	case "safe":
		return false, nil, nil
	case "unsafe":
		return true, splitCategories(rest), nil
	}
	return false, nil, fmt.Errorf("the guard model's verdict %q is neither safe nor unsafe", clip(s))
}

func splitCategories(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// doJSON sends a request and decodes a 200 JSON answer.
func doJSON(req *http.Request, out any) error {
	resp, err := outClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return errors.New("timed out")
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	return nil
}

// Webhook sends texts to an outside service in the Presidio REST shapes:
// POST {url}/analyze {"text","language","entities","score_threshold"}
// answers [{"entity_type","start","end","score"}] (offsets in
// characters), each a finding with the check's action; redacted input
// becomes placeholders put back in the answer. With anonymizer_url, the
// text is instead replaced by what POST {anonymizer_url}/anonymize
// {"text","analyzer_results"} returns (not put back).
type Webhook struct {
	Scope
	URL            string            `json:"url"`
	AnonymizerURL  string            `json:"anonymizer_url,omitempty"`
	Language       string            `json:"language,omitempty"`
	Entities       []string          `json:"entities,omitempty"`
	ScoreThreshold float64           `json:"score_threshold,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`

	headers http.Header
}

// CaddyModule returns the Caddy module information.
func (Webhook) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.llm_guardrails.checks.webhook", New: func() caddy.Module { return new(Webhook) }}
}

// Provision checks the configuration.
func (wh *Webhook) Provision(caddy.Context) error {
	if err := wh.defaults("webhook", []Stage{Input}, Redact); err != nil {
		return err
	}
	if wh.URL == "" {
		return fmt.Errorf("check %s: no url; give the analyzer's base URL (it gets POST /analyze)", wh.Name)
	}
	wh.URL = strings.TrimRight(wh.URL, "/")
	wh.AnonymizerURL = strings.TrimRight(wh.AnonymizerURL, "/")
	if wh.Language == "" {
		wh.Language = "en"
	}
	repl := caddy.NewReplacer()
	wh.headers = http.Header{}
	for k, v := range wh.Headers {
		wh.headers.Set(k, repl.ReplaceAll(v, ""))
	}
	return nil
}

// presidioResult is one entity the analyzer found.
type presidioResult struct {
	EntityType string  `json:"entity_type"`
	Start      int     `json:"start"`
	End        int     `json:"end"`
	Score      float64 `json:"score"`
}

// Kinds for Presidio's entity names, so that placeholders match the
// built-in detectors'.
var presidioKinds = map[string]string{
	"EMAIL_ADDRESS": KindEmail, "PHONE_NUMBER": KindPhone, "CREDIT_CARD": KindCard, "IBAN_CODE": KindIBAN,
	"IP_ADDRESS": KindIP, "US_SSN": KindNationalID,
}

// Inspect sends each text to the analyzer.
func (wh *Webhook) Inspect(ctx context.Context, in *Inspection) ([]Finding, error) {
	var out []Finding
	for ti, text := range in.Texts {
		if strings.TrimSpace(text) == "" {
			continue
		}
		body := map[string]any{"text": text, "language": wh.Language}
		if len(wh.Entities) > 0 {
			body["entities"] = wh.Entities
		}
		if wh.ScoreThreshold > 0 {
			body["score_threshold"] = wh.ScoreThreshold
		}
		var results []presidioResult
		if err := wh.post(ctx, wh.URL+"/analyze", body, &results); err != nil {
			return nil, err
		}
		if len(results) == 0 {
			continue
		}
		if wh.AnonymizerURL != "" && wh.Action == Redact {
			var anon struct {
				Text string `json:"text"`
			}
			if err := wh.post(ctx, wh.AnonymizerURL+"/anonymize", map[string]any{"text": text, "analyzer_results": results}, &anon); err != nil {
				return nil, err
			}
			out = append(out, Finding{Text: ti, Start: 0, End: len(text), Kind: "ANONYMIZED", Action: Redact, Replacement: anon.Text})
			continue
		}
		offsets := runeOffsets(text)
		for _, r := range results {
			if r.Start < 0 || r.End <= r.Start || r.End >= len(offsets) {
				return nil, fmt.Errorf("%s/analyze: entity %s at %d..%d is outside the text", wh.URL, r.EntityType, r.Start, r.End)
			}
			kind := presidioKinds[r.EntityType]
			if kind == "" {
				kind = strings.ToUpper(r.EntityType)
				if !validKind(kind) {
					kind = "ENTITY"
				}
			}
			out = append(out, Finding{Text: ti, Start: offsets[r.Start], End: offsets[r.End], Kind: kind, Action: wh.Action})
		}
	}
	return out, nil
}

// runeOffsets maps character offsets (as Presidio counts them) to byte
// offsets; the last entry is the text's length.
func runeOffsets(s string) []int {
	out := make([]int, 0, utf8.RuneCountInString(s)+1)
	for i := range s {
		out = append(out, i)
	}
	return append(out, len(s))
}

func (wh *Webhook) post(ctx context.Context, url string, body, out any) error {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	for k, v := range wh.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if err := doJSON(req, out); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}

var (
	_ Check = (*Judge)(nil)
	_ Check = (*Webhook)(nil)
)
