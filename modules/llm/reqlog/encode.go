package reqlog

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// appendRecord appends a record's JSON as Encode writes it (the shape
// of stored, which Decode reads), without reflection: the log's writer
// encodes every request, and encoding/json's reflection was a third of
// its work.
func appendRecord(b []byte, r *llmapi.RequestRecord) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	for _, f := range [...]struct{ k, v string }{
		{"node", r.Node}, {"api", r.API}, {"key_id", r.KeyID}, {"tenant", r.Tenant}, {"model", r.Model},
		{"served", r.Served}, {"route", r.Route}, {"replica", r.Replica}, {"replica_node", r.ReplicaNode}, {"engine", r.Engine},
	} {
		b = appendField(b, f.k, f.v)
	}
	if r.Stream {
		b = append(b, `,"stream":true`...)
	}
	b = strconv.AppendInt(append(b, `,"status":`...), int64(r.Status), 10)
	b = appendField(b, "error", r.Error)
	for _, f := range [...]struct {
		k string
		v int64
	}{{"prompt_tokens", r.PromptTokens}, {"completion_tokens", r.CompletionTokens}, {"cached_tokens", r.CachedTokens}} {
		if f.v != 0 {
			b = strconv.AppendInt(append(append(append(b, `,"`...), f.k...), `":`...), f.v, 10)
		}
	}
	if r.Cost != 0 {
		b = appendFloat(append(b, `,"cost":`...), r.Cost)
	}
	b = appendFloat(append(b, `,"latency_ms":`...), r.LatencyMS)
	if r.TTFTMS != 0 {
		b = appendFloat(append(b, `,"ttft_ms":`...), r.TTFTMS)
	}
	for _, f := range [...]struct{ k, v string }{{"cache", r.Cache}, {"guard", r.Guard}, {"tool", r.Tool}, {"kb", r.KB}} {
		b = appendField(b, f.k, f.v)
	}
	if r.Bodies {
		b = append(b, `,"bodies":true`...)
	}
	b = strconv.AppendInt(append(b, `,"t":`...), r.Time.UnixNano(), 10)
	b = strconv.AppendInt(append(b, `,"e":`...), r.End.UnixNano(), 10)
	return append(b, '}')
}

// appendField appends ,"k":"v" when v is set.
func appendField(b []byte, k, v string) []byte {
	if v == "" {
		return b
	}
	b = append(append(append(b, `,"`...), k...), `":`...)
	return appendString(b, v)
}

func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		f = 0
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string: quotes, backslashes and
// control characters escaped, bytes that are not UTF-8 replaced.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
			i++
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			i++
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
		}
	}
	return append(b, '"')
}
