package llmcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
)

// ignored are request fields that do not shape the answer.
var ignored = map[string]bool{"stream": true, "stream_options": true, "user": true, "metadata": true, "store": true}

// keys are what a request is cached under: its exact key and, when its
// last turn is a user's question (a completion's prompt), that question
// and the bucket of its context.
type keys struct {
	exact, bucket, question string
	semantic                bool // bucket and question are set
}

// keyScratch is the reused memory of computing keys.
type keyScratch struct {
	buf, rest, text []byte
	members         []openai.Member
	inner           []openai.Member
	elems, elems2   [][]byte
}

var keyScratchPool = sync.Pool{New: func() any { return new(keyScratch) }}

// keysOf hashes everything that shapes the answer, within a scope: the
// body in canonical form (members sorted, insignificant whitespace gone,
// see openai.AppendCanonical), less the members that only shape its
// delivery. With semantic, it also splits off the last user question: the
// bucket hashes the rest, the context similar questions must share. raw is
// a JSON object (a request Enter accepted).
func keysOf(scope, model, endpoint string, raw []byte, semantic bool) keys {
	sc := keyScratchPool.Get().(*keyScratch)
	defer func() {
		// The slices point into the body: drop them, so that a pooled
		// scratch does not keep a large body alive.
		clear(sc.members[:cap(sc.members)])
		clear(sc.inner[:cap(sc.inner)])
		clear(sc.elems[:cap(sc.elems)])
		clear(sc.elems2[:cap(sc.elems2)])
		keyScratchPool.Put(sc)
	}()
	buf := appendKeyPrefix(sc.buf[:0], scope, model, endpoint)
	prefix := len(buf)
	buf = append(buf, '{')
	cutFrom, cutTo := -1, -1 // the question's bytes in buf, left out of the bucket
	var question []byte
	sc.members = openai.SortMembers(openai.AppendMembers(sc.members[:0], raw))
	n := 0
	for _, m := range sc.members {
		k := string(m.Key) // no copy: compared only
		if ignored[k] || k == "model" {
			continue
		}
		start := len(buf)
		if n > 0 {
			buf = append(buf, ',')
		}
		n++
		buf = openai.AppendCanonicalString(buf, m.Quoted)
		buf = append(buf, ':')
		switch {
		case semantic && endpoint == openai.Completions && k == "prompt" && len(m.Value) > 0 && m.Value[0] == '"':
			buf = openai.AppendCanonical(buf, m.Value)
			question = openai.AppendUnquoted(sc.text[:0], m.Value)
			cutFrom, cutTo = start, len(buf)
		case semantic && endpoint != openai.Completions && k == "messages" && len(m.Value) > 0 && m.Value[0] == '[':
			sc.elems = openai.AppendElements(sc.elems[:0], m.Value)
			buf = append(buf, '[')
			for i, el := range sc.elems {
				if i == len(sc.elems)-1 {
					cutFrom = len(buf)
					if i > 0 {
						cutFrom-- // its comma
					}
					if q, ok := sc.userText(el); ok {
						question = q
					}
				}
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = openai.AppendCanonical(buf, el)
			}
			cutTo = len(buf)
			buf = append(buf, ']')
		default:
			buf = openai.AppendCanonical(buf, m.Value)
		}
	}
	buf = append(buf, '}')
	ks := keys{exact: hashHex(buf)}
	if question != nil && len(bytes.TrimSpace(question)) > 0 {
		if cutFrom == prefix+1 && cutTo < len(buf) && buf[cutTo] == ',' {
			cutTo++ // the first member cut: its comma goes with it
		}
		rest := appendKeyPrefix(sc.rest[:0], scope, model, endpoint+"#context")
		rest = append(rest, buf[prefix:cutFrom]...)
		rest = append(rest, buf[cutTo:]...)
		ks.bucket, ks.question, ks.semantic = bucketName(rest), string(question), true
		sc.rest = rest
	}
	sc.buf = buf
	if question != nil {
		sc.text = question
	}
	return ks
}

// userText is the text of a message when it is the user's: its content
// string, or its text parts each followed by a space.
func (sc *keyScratch) userText(msg []byte) ([]byte, bool) {
	sc.inner = openai.AppendMembers(sc.inner[:0], msg)
	var content []byte
	user := false
	for _, m := range sc.inner {
		switch string(m.Key) {
		case "role":
			user = string(m.Value) == `"user"`
		case "content":
			content = m.Value
		}
	}
	if !user || len(content) == 0 {
		return nil, false
	}
	text := sc.text[:0]
	switch content[0] {
	case '"':
		text = openai.AppendUnquoted(text, content)
	case '[':
		sc.elems2 = openai.AppendElements(sc.elems2[:0], content)
		for _, part := range sc.elems2 {
			sc.inner = openai.AppendMembers(sc.inner[:0], part)
			for _, m := range sc.inner {
				if string(m.Key) == "text" && len(m.Value) > 0 && m.Value[0] == '"' {
					text = openai.AppendUnquoted(text, m.Value)
					text = append(text, ' ')
				}
			}
		}
	default:
		return nil, false
	}
	sc.text = text
	return text, true
}

// exactKey is the exact key of a body.
func exactKey(scope, model, endpoint string, raw []byte) (string, error) {
	if !json.Valid(raw) {
		return "", errors.New("the body is not valid JSON")
	}
	return keysOf(scope, model, endpoint, raw, false).exact, nil
}

func appendKeyPrefix(dst []byte, scope, model, endpoint string) []byte {
	dst = append(dst, scope...)
	dst = append(dst, 0)
	dst = append(dst, model...)
	dst = append(dst, 0)
	dst = append(dst, endpoint...)
	return append(dst, 0)
}

// bucketName is hashHex of a bucket's context. Many questions share a
// context (a system prompt, a conversation's start), so their entries
// share one copy of its name: up to maxBucketNames names are kept, and
// the table starts afresh when full.
func bucketName(b []byte) string {
	hx := sumHex(b)
	bucketNames.RLock()
	n, ok := bucketNames.m[string(hx[:])]
	bucketNames.RUnlock()
	if ok {
		return n
	}
	n = string(hx[:])
	bucketNames.Lock()
	if bucketNames.m == nil || len(bucketNames.m) >= maxBucketNames {
		bucketNames.m = make(map[string]string, 1024)
	}
	bucketNames.m[n] = n
	bucketNames.Unlock()
	return n
}

var bucketNames struct {
	sync.RWMutex
	m map[string]string
}

const maxBucketNames = 1 << 16

// hashHex is the SHA-256 of b, in hex.
func hashHex(b []byte) string {
	hx := sumHex(b)
	return string(hx[:]) // one allocation, where hex.EncodeToString makes two
}

// sumHex is the SHA-256 of b in hex, in an array: no allocation.
func sumHex(b []byte) [2 * sha256.Size]byte {
	sum := sha256.Sum256(b)
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], sum[:])
	return hx
}

// scopeOf names who may share an entry: the tenant at the configured
// level when llm_quota ran, else everyone.
func scopeOf(r *http.Request, level string) string {
	t, ok := tenancy.TenantOf(r)
	if !ok || level == "global" {
		return "global"
	}
	// Made once per tenant and level: every entry of a scope shares it.
	k, ok := scopeKeys[level]
	if !ok {
		k = scopeKeys["project"]
	}
	return t.Memo(k, func() any {
		switch level {
		case "key":
			return "k:" + t.KeyID
		case "team":
			return "t:" + t.Team
		case "org":
			return "o:" + t.Org
		}
		return "p:" + t.Project
	}).(string)
}

// scopeKey keys a tenant's scope string in its memo.
type scopeKey string

// scopeKeys are the scope keys of each level, made into interface values
// once rather than on every request.
var scopeKeys = map[string]any{"key": scopeKey("key"), "team": scopeKey("team"), "org": scopeKey("org"), "project": scopeKey("project")}

// cacheControl reads the request's no-cache and no-store directives.
func cacheControl(r *http.Request) (noCache, noStore bool) {
	for _, v := range r.Header.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(d)) {
			case "no-cache":
				noCache = true
			case "no-store":
				noStore = true
			}
		}
	}
	return noCache, noStore
}
