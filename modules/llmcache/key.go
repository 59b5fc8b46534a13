package llmcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/llmgw/llmgw/modules/llm"
)

// ignored are request fields that do not shape the answer.
var ignored = map[string]bool{"stream": true, "stream_options": true, "user": true, "metadata": true, "store": true}

// exactKey hashes everything that shapes the answer, within a scope: the
// body with keys sorted and insignificant whitespace gone (by decoding and
// encoding it), less the fields that only shape its delivery.
func exactKey(scope, model, endpoint string, raw []byte) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return "", err
	}
	return keyOf(scope, model, endpoint, fields)
}

// keyOf is exactKey over a body already split into its fields.
func keyOf(scope, model, endpoint string, fields map[string]json.RawMessage) (string, error) {
	canon, err := canonFields(fields)
	if err != nil {
		return "", err
	}
	return hashCanon(scope, model, endpoint, canon)
}

// canonFields decodes the fields that shape the answer (numbers kept as
// written), so that encoding them again sorts every object's keys.
func canonFields(fields map[string]json.RawMessage) (map[string]any, error) {
	canon := make(map[string]any, len(fields))
	for k, v := range fields {
		if ignored[k] || k == "model" {
			continue
		}
		var x any
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if err := d.Decode(&x); err != nil {
			return nil, err
		}
		canon[k] = x
	}
	return canon, nil
}

// canonBody is canonFields of a whole body, in one pass.
func canonBody(raw []byte) (map[string]any, error) {
	var body map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&body); err != nil {
		return nil, err
	}
	for k := range body {
		if ignored[k] || k == "model" {
			delete(body, k)
		}
	}
	return body, nil
}

// hashCanon hashes canonical fields within a scope, model and endpoint.
func hashCanon(scope, model, endpoint string, canon map[string]any) (string, error) {
	b, err := json.Marshal(canon) // maps encode with sorted keys
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, s := range []string{scope, model, endpoint} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// scopeOf names who may share an entry: the tenant at the configured
// level when llm_quota ran, else everyone.
func scopeOf(r *http.Request, level string) string {
	t, ok := llm.TenantOf(r)
	if !ok || level == "global" {
		return "global"
	}
	switch level {
	case "key":
		return "k:" + t.KeyID
	case "team":
		return "t:" + t.Team
	case "org":
		return "o:" + t.Org
	}
	return "p:" + t.Project
}

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
