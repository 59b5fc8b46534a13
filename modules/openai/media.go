package openai

import (
	"bytes"
	"strings"
)

// CheckMediaURL checks the URL of an image (or other media) a request
// gives, raw as a JSON string: only http, https and data URLs pass. An
// engine fetches what it is given, and some read file: URLs (vLLM with
// --allowed-local-media-path, llama.cpp's server reading local paths), so
// another scheme would let a client read files on the engine's machine.
func CheckMediaURL(at string, raw []byte) error {
	u := raw
	if len(u) >= 2 && u[0] == '"' {
		u = Unquote(u)
	}
	u = bytes.TrimLeft(u, " \t\r\n\f\v\x00")
	scheme, _, found := bytes.Cut(u, []byte{':'})
	if found {
		switch s := strings.ToLower(string(scheme)); s {
		case "http", "https", "data":
			return nil
		}
	}
	shown := string(scheme)
	if !found || len(shown) > 20 {
		return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_image_url", Param: at,
			Message: at + " must be an http(s) URL or a data: URL (data:image/png;base64,…)"}
	}
	return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_image_url", Param: at,
		Message: at + " must be an http(s) URL or a data: URL, not a " + strings.ToLower(shown) + ": URL; send a file's contents as a data: URL (data:image/png;base64,…)"}
}
