package openai

import "net/http"

// IsSSE reports whether headers announce a stream of server-sent events.
func IsSSE(h http.Header) bool {
	ct := h.Get("Content-Type")
	return len(ct) >= 17 && ct[:17] == "text/event-stream"
}
