package openai

import "encoding/json"

// FileSearch is the file_search tool of a Responses request: the
// gateway searches the knowledge bases it names and gives the passages
// to the model, whatever engine serves it.
type FileSearch struct {
	VectorStoreIDs []string
	MaxNumResults  int             // 0: the knowledge base's default
	Filters        json.RawMessage // as sent, nil when absent
	ScoreThreshold float64         // ranking_options.score_threshold
	// IncludeResults is include: ["file_search_call.results"].
	IncludeResults bool
}

// Retrieval is what a knowledge-base search found for a request, set by
// the handler that searched before the model sees the passages; the
// Responses translation writes it as a file_search_call output item and
// the answer's file_citation annotations.
type Retrieval struct {
	CallID  string // "fs_…"
	Queries []string
	Status  string // "completed" or "failed"
	Results []RetrievalResult
}

// RetrievalResult is one passage given to the model; its number in the
// prompt is its index in Results plus one.
type RetrievalResult struct {
	FileID     string         `json:"file_id"`
	Filename   string         `json:"filename"`
	Score      float64        `json:"score"`
	Text       string         `json:"text"`
	Attributes map[string]any `json:"attributes"`
}
