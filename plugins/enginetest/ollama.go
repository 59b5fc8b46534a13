package enginetest

import (
	"os"
	"os/exec"
	"path/filepath"
)

// OllamaVersion is the Ollama release the tests and benchmarks run: the
// newest whose module zip builds (newer ones lack C++ headers).
const OllamaVersion = "v0.6.5"

// OllamaBin finds the Ollama that .ci/install builds into the cache
// directory, else LLMGW_OLLAMA, else ollama on PATH. It returns "" when
// there is none.
func OllamaBin() string {
	if p := os.Getenv("LLMGW_OLLAMA"); p != "" {
		return p
	}
	if cache, err := os.UserCacheDir(); err == nil {
		p := filepath.Join(cache, "llmgw", "ollama-"+OllamaVersion, "ollama")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("ollama"); err == nil {
		return p
	}
	return ""
}

// OllamaMissing says how to get Ollama when OllamaBin finds none.
const OllamaMissing = "ollama is not installed; .ci/install builds it (go install github.com/ollama/ollama@" + OllamaVersion + " into ~/.cache/llmgw/ollama-" + OllamaVersion + ")"
