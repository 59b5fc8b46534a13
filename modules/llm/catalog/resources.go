package catalog

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
)

// Resources are what a node has or what one replica of a model needs.
type Resources struct {
	// Memory in bytes (the Caddyfile takes sizes such as 8GiB).
	Memory int64 `json:"memory,omitempty"`
	Cores  int   `json:"cores,omitempty"`
	GPUs   int   `json:"gpus,omitempty"`
}

// Add is r plus o times sign (1 or -1).
func (r Resources) Add(o Resources, sign int64) Resources {
	return Resources{Memory: r.Memory + sign*o.Memory, Cores: r.Cores + int(sign)*o.Cores, GPUs: r.GPUs + int(sign)*o.GPUs}
}

// Fits tells whether r fits in the room in.
func (r Resources) Fits(in Resources) bool {
	return r.Memory <= in.Memory && r.Cores <= in.Cores && r.GPUs <= in.GPUs
}

func (r Resources) String() string { return r.Describe(r) }

// Describe names r's amounts of the kinds that like has.
func (r Resources) Describe(like Resources) string {
	var parts []string
	if like.Memory != 0 {
		parts = append(parts, humanize.IBytes(uint64(max(r.Memory, 0)))+" memory")
	}
	if like.Cores != 0 {
		parts = append(parts, strconv.Itoa(r.Cores)+" cores")
	}
	if like.GPUs != 0 {
		parts = append(parts, strconv.Itoa(r.GPUs)+" GPUs")
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// Model classes, in the order they give way: when a replica does not fit,
// replicas of lower classes are stopped to make room.
const (
	ClassCritical      = "critical"
	ClassStandard      = "standard"
	ClassOpportunistic = "opportunistic"
)

// ClassRank orders the classes: a higher rank may stop a lower one's
// replicas for room.
func ClassRank(c string) int {
	switch c {
	case ClassCritical:
		return 3
	case ClassOpportunistic:
		return 1
	}
	return 2
}

// Needs is what one replica of the model needs from the node (on its
// first profile, when it has profiles).
func (m *Model) Needs() Resources {
	if len(m.Profiles) > 0 {
		return m.Shape(0).Needs() // its first profile's (profiles.go)
	}
	if m.Resources == nil {
		return Resources{}
	}
	return *m.Resources
}

// Weight formats the gateway recognises in a model's source.
const (
	FormatGGUF        = "gguf"
	FormatSafetensors = "safetensors"
)

// SourceFormat tells a local source's weight format: a GGUF file, or a
// directory of safetensors. It returns "" for what it does not recognise
// (and for URLs and engine-specific sources).
func SourceFormat(source string) (string, error) {
	if source == "" || strings.Contains(source, "://") {
		return "", nil
	}
	st, err := os.Stat(source)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		entries, _ := os.ReadDir(source)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".safetensors") {
				return FormatSafetensors, nil
			}
		}
		return "", nil
	}
	f, err := os.Open(source)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var magic [4]byte
	if n, _ := f.Read(magic[:]); n == 4 && string(magic[:]) == "GGUF" {
		return FormatGGUF, nil
	}
	return "", nil
}

// CheckFormat refuses a model whose weights its engine cannot load, when
// the engine loads weight files (GGUF, safetensors) at all.
func CheckFormat(m *Model, formats []string) error {
	files := slices.Contains(formats, FormatGGUF) || slices.Contains(formats, FormatSafetensors)
	if !files {
		return nil
	}
	if m.Source == "" {
		return fmt.Errorf("model %q: engine %s loads %s weights; set source to them", m.Name, m.Engine, strings.Join(formats, " or "))
	}
	got, err := SourceFormat(m.Source)
	if err != nil {
		return fmt.Errorf("model %q: source: %w", m.Name, err)
	}
	if got == "" && !strings.Contains(m.Source, "://") {
		return fmt.Errorf("model %q: engine %s loads %s weights and %s is neither a GGUF file nor a directory of safetensors",
			m.Name, m.Engine, strings.Join(formats, " or "), m.Source)
	}
	if got != "" && !slices.Contains(formats, got) {
		return fmt.Errorf("model %q: engine %s cannot load %s weights (%s); it loads %s", m.Name, m.Engine, got, m.Source, strings.Join(formats, " or "))
	}
	return nil
}
