package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"
)

// DefaultProbeInterval is how often an outside provider is probed when
// its model does not say (option probe_interval).
const DefaultProbeInterval = 30 * time.Second

// ProbeTimeout bounds one probe.
const ProbeTimeout = 2 * time.Second

// Probe is how an outside provider is checked: a cheap GET (its model
// list) with the replica's key.
type Probe struct {
	URL string // such as https://api.openai.com/v1/models
	// Header is sent with it; a value of several lines is a list of
	// alternatives (keys, see Replica.Headers), tried in turn while the
	// provider refuses them.
	Header map[string]string
	// Interval between probes; 0 means DefaultProbeInterval, negative
	// means never (the provider is taken for ready).
	Interval time.Duration
}

// ProbeFor is the probe of replica r: GET <base URL>/models (before a
// query the base carries), with the first of each header's alternatives.
// An Azure OpenAI deployment has no model list; its resource's
// (<resource>/openai/models?api-version=…) is probed instead.
func ProbeFor(r Replica, interval time.Duration) Probe {
	p := Probe{URL: JoinURL(r.BaseURL, "models"), Header: map[string]string{}, Interval: interval}
	if base, query, _ := strings.Cut(r.BaseURL, "?"); strings.Contains(base, "/openai/deployments/") {
		resource, _, _ := strings.Cut(base, "/deployments/")
		p.URL = JoinURL(resource+"?"+query, "models")
	}
	maps.Copy(p.Header, r.Headers)
	return p
}

// JoinURL joins a base URL and a path, keeping a query the base carries
// (Azure OpenAI's api-version) after the path.
func JoinURL(base, path string) string {
	if i := strings.IndexByte(base, '?'); i >= 0 {
		return base[:i] + "/" + path + base[i:]
	}
	return base + "/" + path
}

// ProbeResult is what one probe found.
type ProbeResult struct {
	URL     string        `json:"url"`              // what was tried (no key in it)
	Status  int           `json:"status,omitempty"` // the HTTP status; 0: no answer
	Latency time.Duration `json:"latency"`
	// State is StateReady or StateFailing; Reason says why it fails, in
	// words a person can act on.
	State  string    `json:"state"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Check probes p with client (nil: http.DefaultClient), each try bounded
// by ProbeTimeout, trying the next key while the provider refuses one.
// Any answer but 401, 403 and 5xx counts as ready: a provider that
// rate-limits (429) or has no model list (404) still answers.
func (p Probe) Check(ctx context.Context, client *http.Client) ProbeResult {
	if client == nil {
		client = http.DefaultClient
	}
	keys := 1
	for _, v := range p.Header {
		keys = max(keys, strings.Count(v, "\n")+1)
	}
	var res ProbeResult
	for key := range keys {
		res = p.try(ctx, client, key)
		if res.Status != http.StatusUnauthorized && res.Status != http.StatusForbidden {
			break
		}
	}
	if keys > 1 && res.State == StateFailing && res.Status != 0 && res.Status < 500 {
		res.Reason = fmt.Sprintf("the provider refused each of its %d keys: %s", keys, res.Reason)
	}
	return res
}

// try probes once, with alternative key of each header.
func (p Probe) try(ctx context.Context, client *http.Client, key int) ProbeResult {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	res := ProbeResult{URL: p.URL, At: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		res.State, res.Reason = StateFailing, fmt.Sprintf("the probe URL %s is not valid: %v; check base_url", bound(p.URL), err)
		return res
	}
	for k, v := range p.Header {
		alts := strings.Split(v, "\n")
		req.Header.Set(k, alts[key%len(alts)])
	}
	resp, err := client.Do(req)
	res.Latency = time.Since(res.At)
	if err != nil {
		res.State, res.Reason = StateFailing, unreachable(p.URL, err)
		return res
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	res.Status = resp.StatusCode
	res.State, res.Reason = StateReady, answerReason(p.URL, resp.StatusCode)
	if res.Reason != "" {
		res.State = StateFailing
	}
	return res
}

// unreachable says why a provider gave no answer.
func unreachable(url string, err error) string {
	why := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		why = fmt.Sprintf("no answer within %s", ProbeTimeout)
	}
	// The transport's error repeats the method and URL; keep its cause.
	if i := strings.LastIndex(why, ": "); i >= 0 && strings.Contains(why, url) {
		why = why[i+2:]
	}
	return fmt.Sprintf("unreachable: GET %s: %s; check base_url and that the provider is up", url, why)
}

// answerReason says why an answer shows the provider failing, or "".
func answerReason(url string, code int) string {
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Sprintf("the provider refused the key: GET %s answered %d; check api_key", url, code)
	case code >= 500:
		return fmt.Sprintf("the provider is failing: GET %s answered %d; wait for it, or check base_url", url, code)
	}
	return ""
}

// ProbeIntervalOption is the option of engines whose replicas are probed
// (outside providers).
var ProbeIntervalOption = Option{Name: "probe_interval", Type: TypeDuration, Example: "30s",
	Description: "how often the provider is probed (GET <base_url>/models with the key) to tell whether it serves; a provider that does not answer, refuses the key or fails is shown failing with the reason and gets no request until it answers again; 0 turns probing off; default 30s"}

// ProbeInterval is option probe_interval: 0 (not set) is the default
// interval, a zero duration is never (negative).
func ProbeInterval(opts map[string]string) (time.Duration, error) {
	v, ok := opts["probe_interval"]
	if !ok || v == "" || strings.Contains(v, "{") {
		return DefaultProbeInterval, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("probe_interval %q is not a duration; use one such as 30s, or 0 to turn probing off", bound(v))
	}
	if d <= 0 {
		return -1, nil
	}
	return d, nil
}
