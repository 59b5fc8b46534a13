package reqlog

import (
	"encoding/json"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/openai"
)

// MaxBody bounds each body the log keeps.
const MaxBody = openai.MaxLoggedBody

// Entry is a record on its way to the store, with its bodies when kept.
type Entry struct {
	Rec    llmapi.RequestRecord
	Bodies *Bodies
}

// Bodies are a request's bodies as the log keeps them.
type Bodies struct {
	Request   string `json:"request,omitempty"`
	Response  string `json:"response,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// stored is a record as the stores keep it: its times as Unix
// nanoseconds, which encode and decode several times faster than RFC 3339
// text.
type stored struct {
	llmapi.RequestRecord
	T int64 `json:"t"`
	E int64 `json:"e"`
}

// Encode is a record as the stores keep it. Its JSON starts with the
// request id ({"id":"req_…).
func Encode(rec *llmapi.RequestRecord) ([]byte, error) {
	return appendRecord(make([]byte, 0, 512), rec), nil
}

// Decode reads a record Encode wrote.
func Decode(raw []byte, rec *llmapi.RequestRecord) error {
	var s stored
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	*rec = s.RequestRecord
	rec.Time, rec.End = time.Unix(0, s.T).UTC(), time.Unix(0, s.E).UTC()
	return nil
}

// entryOf makes the record of a tracked request; node names this node.
func entryOf(t *openai.Tracked, node string) Entry {
	f := &t.LogFields
	rec := llmapi.RequestRecord{
		ID: f.RequestID, Time: f.Start.UTC(), End: f.End.UTC(), Node: node,
		API: f.API, KeyID: f.Key, Tenant: f.Tenant, Model: f.Asked, Served: f.Model, Route: f.Route,
		Replica: f.Replica, Engine: f.Engine, Stream: f.Stream, Status: f.Status, Error: f.ErrCode,
		PromptTokens: f.PromptTokens, CompletionTokens: f.CompletionTokens, CachedTokens: f.CachedTokens,
		Cache: f.Cache, Guard: f.Guard, Tool: f.Tool, KB: f.KB,
		LatencyMS: ms(f.End.Sub(f.Start)),
	}
	if f.Tool != "" && rec.API == "" {
		rec.API = "mcp"
	}
	if rec.Model == "" {
		rec.Model = rec.Served
	}
	if f.Replica != "" {
		rec.ReplicaNode = f.ReplicaNode
		if rec.ReplicaNode == "" {
			rec.ReplicaNode = node
		}
	}
	if f.HasCost {
		rec.Cost = float64(f.CostMicros) / 1e6
	}
	if !f.First.IsZero() {
		rec.TTFTMS = ms(f.First.Sub(f.Start))
	}
	if rec.Status == 0 {
		rec.Status = 499 // nothing was written: the client left first
	}
	e := Entry{Rec: rec}
	if f.KeepBodies && (len(f.ReqBody) > 0 || len(f.RespBody) > 0) {
		e.Bodies = &Bodies{Request: bounded(f.ReqBody), Response: bounded(f.RespBody),
			Truncated: len(f.ReqBody) > MaxBody || len(f.RespBody) > MaxBody}
		e.Rec.Bodies = true
	}
	return e
}

func bounded(b []byte) string {
	if len(b) > MaxBody {
		b = b[:MaxBody]
	}
	return string(b)
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
