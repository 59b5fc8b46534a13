package llmapi

import (
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// ProvidersModel is a model served by several providers as this node's
// router sees it (GET /llm/providers/models and
// /llm/providers/models/{name}): what its policy orders the providers
// by, live. No key or header value of a provider is in it.
type ProvidersModel struct {
	Name   string `json:"name"`
	Policy string `json:"policy"` // weighted, cost, latency, usage or order
	// LatencyObjectiveMS is the recent time to first byte above which a
	// provider counts as slow; 0 (left out): none.
	LatencyObjectiveMS float64         `json:"latency_objective_ms,omitempty"`
	Providers          []ProviderState `json:"providers"`
}

// ProviderState is one provider of a model and its live state.
type ProviderState struct {
	Name       string                 `json:"name"`
	Model      string                 `json:"model"` // the catalog model that serves it
	SelfHosted bool                   `json:"self_hosted"`
	Price      *catalog.ProviderPrice `json:"price,omitempty"`
	// PriceRank is what the cost policy orders by: per million tokens at
	// three prompt tokens to one of completion (0 for free or priced by
	// the GPU-hour).
	PriceRank float64 `json:"price_rank"`
	Weight    int     `json:"weight"`
	RPM       int     `json:"rpm,omitempty"`
	TPM       int     `json:"tpm,omitempty"`
	// State is ready; slow (recent time to first byte above the latency
	// objective); over_limits (this minute's requests or tokens reached
	// its rpm or tpm); full (self-hosted: no ready replica below its
	// target_concurrency; outside: no ready replica); resting (after a
	// 429 or failures, until RestingUntil).
	State        string    `json:"state"`
	RestingUntil time.Time `json:"resting_until,omitzero"`
	// RestReason says why it rests: 429 (the provider's Retry-After, or
	// a second when it named none), failures (connect errors or 5xx in a
	// row: half a second, doubling with each, at most 15s) or
	// limit_spent (its x-ratelimit-* headers said a limit is spent,
	// until its reset). Left out when it does not rest.
	RestReason     string `json:"rest_reason,omitempty"`
	FailuresInARow int    `json:"failures_in_a_row"`
	// TTFTMS is the recent time to first byte (a moving average), in
	// milliseconds; left out when never measured. LastSampled is when it
	// was last measured: one older than 30s no longer counts as slow.
	TTFTMS      *float64  `json:"ttft_ms,omitempty"`
	LastSampled time.Time `json:"last_sampled,omitzero"`
	// MinuteRequests and MinuteTokens are this minute's requests and
	// tokens, counted for a provider with an rpm or tpm only (left out
	// otherwise).
	MinuteRequests *int64 `json:"minute_requests,omitempty"`
	MinuteTokens   *int64 `json:"minute_tokens,omitempty"`
	// Headroom is the share of its rate limits (0 to 1) the provider's
	// x-ratelimit-* (or anthropic-ratelimit-*) headers said it had left
	// on its last answer that carried them; left out until one says it
	// has less than all.
	Headroom *float64 `json:"headroom,omitempty"`
}
