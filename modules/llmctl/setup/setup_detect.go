package setup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/llmgw/llmgw/modules/llm/place"
)

// machine is what setup finds on this machine: the resources the llm app
// would detect itself (place.DetectNode), the GPUs by vendor, the engines
// on PATH and a local Ollama server's models.
type machine struct {
	Cores        int
	Memory       int64
	NVIDIA       []string // one name per GPU (nvidia-smi), or "NVIDIA GPU" per /proc/driver/nvidia entry
	AMD          bool     // /dev/kfd: the ROCm compute device
	Engines      map[string]string
	Ollama       bool     // a server answers at OllamaURL
	OllamaModels []string // its models, as /api/tags names them
	Host         string
}

// engineCommands are the engine servers llmgw's engines start, by engine.
var engineCommands = []struct{ engine, command string }{
	{"ollama", "ollama"}, {"llamacpp", "llama-server"}, {"vllm", "vllm"},
}

// detectMachine looks at this machine; ollamaURL is where an Ollama
// server would answer ("" to not ask).
func detectMachine(ctx context.Context, ollamaURL string) machine {
	n := place.DetectNode()
	m := machine{Cores: n.Cores, Memory: n.Memory, Engines: map[string]string{}}
	m.Host, _ = os.Hostname()
	m.NVIDIA = nvidiaGPUs(ctx, n.GPUs)
	if _, err := os.Stat("/dev/kfd"); err == nil {
		m.AMD = true
	}
	for _, e := range engineCommands {
		if p, err := exec.LookPath(e.command); err == nil {
			m.Engines[e.engine] = p
		}
	}
	if ollamaURL != "" {
		m.OllamaModels, m.Ollama = ollamaModels(ctx, ollamaURL)
	}
	return m
}

// nvidiaGPUs names the NVIDIA GPUs: nvidia-smi's names when it runs, else
// one per device the driver lists (count, from /proc/driver/nvidia).
func nvidiaGPUs(ctx context.Context, count int) []string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader").Output()
	if err == nil {
		var names []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				names = append(names, l)
			}
		}
		if len(names) > 0 {
			return names
		}
	}
	names := make([]string, count)
	for i := range names {
		names[i] = "NVIDIA GPU"
	}
	return names
}

// ollamaModels lists the models of the Ollama server at base; false when
// none answers there.
func ollamaModels(ctx context.Context, base string) ([]string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/api/tags", nil)
	if err != nil {
		return nil, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, false
	}
	var tags struct {
		Models []struct {
			Name string `json:"name"`
		} `json:"models"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&tags); err != nil {
		return nil, false
	}
	names := []string{}
	for _, m := range tags.Models {
		names = append(names, m.Name)
	}
	return names, true
}

// print says what setup found, one line each.
func (m machine) print(w io.Writer, ollamaURL string) {
	fmt.Fprintf(w, "This machine (%s):\n", m.Host)
	fmt.Fprintf(w, "  CPU cores   %d\n", m.Cores)
	fmt.Fprintf(w, "  memory      %s\n", humanize.IBytes(uint64(max(m.Memory, 0))))
	gpus := "none found (no NVIDIA driver, no /dev/kfd)"
	switch {
	case len(m.NVIDIA) > 0 && m.AMD:
		gpus = fmt.Sprintf("%d NVIDIA (%s), and AMD ROCm (/dev/kfd)", len(m.NVIDIA), strings.Join(m.NVIDIA, "; "))
	case len(m.NVIDIA) > 0:
		gpus = fmt.Sprintf("%d NVIDIA (%s)", len(m.NVIDIA), strings.Join(m.NVIDIA, "; "))
	case m.AMD:
		gpus = "AMD ROCm (/dev/kfd)"
	}
	fmt.Fprintf(w, "  GPUs        %s\n", gpus)
	for _, e := range engineCommands {
		where := "not on PATH"
		if p, ok := m.Engines[e.engine]; ok {
			where = p
		}
		fmt.Fprintf(w, "  %-11s %s\n", e.command, where)
	}
	switch {
	case ollamaURL == "":
	case m.Ollama:
		fmt.Fprintf(w, "  Ollama      answers at %s with %d models: %s\n", ollamaURL, len(m.OllamaModels), strings.Join(m.OllamaModels, ", "))
	default:
		fmt.Fprintf(w, "  Ollama      no server answers at %s\n", ollamaURL)
	}
}
