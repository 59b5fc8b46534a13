package llmjobs

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // the size of JPEG inputs
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/image/webp"

	"github.com/llmgw/llmgw/modules/internal/userfiles"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/openai"
)

// inputRef is how a workflow names one of its job's input files: a node
// input whose value is the string "input:<name>" (such as LoadImage's
// image) gets, when the job runs, the name the file was uploaded under
// on the model's server.
const inputRef = "input:"

// inputFile is one input file of a job (a picture its workflow loads),
// kept in the job's folder until the job is removed.
type inputFile struct {
	Name        string `json:"name"`
	Filename    string `json:"filename,omitempty"`
	ContentType string `json:"content_type"`
	Width       int    `json:"width,omitempty"`
	Height      int    `json:"height,omitempty"`
	Bytes       int64  `json:"bytes"`

	data []byte // the file, until it is kept
}

// inputNames are what input names may be: a letter, digit or _, then up
// to 63 of those, '.' and '-'.
var inputNames = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// badInput is a 400 about an input file.
func badInput(param, format string, args ...any) *openai.Error {
	return &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_input", Param: param,
		Message: fmt.Sprintf(format, args...)}
}

// pictureInfo tells a PNG, JPEG or WebP file's type, extension and size
// from its bytes.
func pictureInfo(b []byte) (ct, ext string, w, h int, ok bool) {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) && len(b) >= 24:
		return "image/png", ".png", int(binary.BigEndian.Uint32(b[16:])), int(binary.BigEndian.Uint32(b[20:])), true
	case bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}):
		cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
		return "image/jpeg", ".jpg", cfg.Width, cfg.Height, err == nil
	case len(b) >= 30 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		cfg, err := webp.DecodeConfig(bytes.NewReader(b))
		return "image/webp", ".webp", cfg.Width, cfg.Height, err == nil
	}
	return "", "", 0, 0, false
}

// readInput reads one file part as input name, within the handler's
// caps (max_input_size; a PNG, JPEG or WebP picture).
func (h *Jobs) readInput(name, param string, part *multipart.Part) (*inputFile, *openai.Error) {
	if !inputNames.MatchString(name) {
		return nil, badInput(param, "input name %s: use letters, digits, _, . and - (up to 64, not starting with . or -)", catalog.Bounded(name))
	}
	b, err := io.ReadAll(io.LimitReader(part, h.MaxInputSize+1))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, requestTooLarge(h)
	case err != nil:
		return nil, badInput(param, "reading input %s: %v", name, err)
	}
	return h.checkInput(name, param, filepath.Base(part.FileName()), b)
}

// checkInput checks a file as input name: its size and type.
func (h *Jobs) checkInput(name, param, filename string, b []byte) (*inputFile, *openai.Error) {
	if int64(len(b)) > h.MaxInputSize {
		return nil, &openai.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "input_too_large", Param: param,
			Message: fmt.Sprintf("input %s (%s) is over %d bytes (max_input_size); send a smaller picture", name, catalog.Bounded(filename), h.MaxInputSize)}
	}
	ct, _, w, hh, ok := pictureInfo(b)
	if !ok || w < 1 || hh < 1 {
		return nil, badInput(param, "input %s (%s) is not a PNG, JPEG or WebP picture; send one of those", name, catalog.Bounded(filename))
	}
	return &inputFile{Name: name, Filename: filename, ContentType: ct, Width: w, Height: hh, Bytes: int64(len(b)), data: b}, nil
}

// fileInputs reads the inputs a job names by their /v1/files id: files
// of the caller's project only.
func (h *Jobs) fileInputs(r *http.Request, ins []*inputFile, byID map[string]string) ([]*inputFile, *openai.Error) {
	for _, name := range sortedKeys(byID) {
		param := "inputs." + name
		if !inputNames.MatchString(name) {
			return nil, badInput(param, "input name %s: use letters, digits, _, . and - (up to 64, not starting with . or -)", catalog.Bounded(name))
		}
		filename, b, err := userfiles.Read(r.Context(), ownerOf(r), byID[name])
		switch {
		case errors.Is(err, userfiles.ErrNoStore):
			return nil, badInput(param, "inputs by file id need the files of /v1/files (llm_kb on this route); or send the job as multipart/form-data with each input file in a file part named after the input")
		case errors.Is(err, userfiles.ErrNotFound):
			return nil, badInput(param, "input %s: your project has no file %s (GET /v1/files lists them; upload a picture with POST /v1/files)", name, catalog.Bounded(byID[name]))
		case err != nil:
			return nil, &openai.Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "server_error", Param: param,
				Message: fmt.Sprintf("reading input %s: %v", name, err)}
		}
		in, e := h.checkInput(name, param, filename, b)
		if e == nil {
			ins, e = h.addInput(ins, in, param)
		}
		if e != nil {
			return nil, e
		}
	}
	return ins, nil
}

// readMultipartJob reads POST /v1/jobs as multipart/form-data: the job
// in a part named request (or job), in JSON, and each input file in a
// file part named after the input.
func (h *Jobs) readMultipartJob(w http.ResponseWriter, r *http.Request) (createRequest, []*inputFile, *openai.Error) {
	var req createRequest
	var ins []*inputFile
	r.Body = http.MaxBytesReader(w, r.Body, h.maxMultipart())
	mr, err := r.MultipartReader()
	if err != nil {
		return req, nil, openai.BadRequest("invalid_request", "reading the multipart body: %v", err)
	}
	seen := false
	for {
		part, err := mr.NextPart()
		var tooBig *http.MaxBytesError
		switch {
		case errors.Is(err, io.EOF):
			if !seen {
				return req, nil, openai.BadRequest("missing_required_parameter", "the multipart body has no part named request: put the job (model, workflow, …) in it as JSON, and each input file in a file part named after the input")
			}
			return req, ins, nil
		case errors.As(err, &tooBig):
			return req, nil, requestTooLarge(h)
		case err != nil:
			return req, nil, openai.BadRequest("invalid_request", "reading the multipart body: %v", err)
		}
		name := part.FormName()
		switch {
		case part.FileName() != "":
			in, e := h.readInput(name, name, part)
			if e == nil {
				ins, e = h.addInput(ins, in, name)
			}
			if e != nil {
				return req, nil, e
			}
		case name == "request" || name == "job":
			if seen {
				return req, nil, openai.BadRequest("invalid_request", "the multipart body has two job parts; send one part named request")
			}
			seen = true
			if e := h.decodeJob(io.LimitReader(part, h.MaxWorkflow+4096), &req); e != nil {
				return req, nil, e
			}
		default:
			return req, nil, openai.BadRequest("invalid_request", "unknown part %s without a filename: send the job as a part named request (JSON) and each input file as a file part (with a filename) named after the input", catalog.Bounded(name))
		}
		part.Close()
	}
}

// requestTooLarge is the 413 of a multipart body over its cap.
func requestTooLarge(h *Jobs) *openai.Error {
	return &openai.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: fmt.Sprintf("the request is too large: at most %d input files of %d bytes each (max_inputs, max_input_size) and a workflow of %d bytes (max_workflow)",
			h.MaxInputs, h.MaxInputSize, h.MaxWorkflow)}
}

// maxMultipart bounds a multipart body: the workflow, the inputs and
// their headers.
func (h *Jobs) maxMultipart() int64 {
	return h.MaxWorkflow + int64(h.MaxInputs)*h.MaxInputSize + 1<<20
}

// addInput adds in to ins, refusing a second input of a name and more
// than max_inputs.
func (h *Jobs) addInput(ins []*inputFile, in *inputFile, param string) ([]*inputFile, *openai.Error) {
	for _, o := range ins {
		if o.Name == in.Name {
			return nil, badInput(param, "two input files are named %s; name each input once", in.Name)
		}
	}
	if len(ins) >= h.MaxInputs {
		return nil, badInput(param, "a job takes at most %d input files (max_inputs)", h.MaxInputs)
	}
	return append(ins, in), nil
}

// workflowNodes reads a workflow as node id → its fields, inputs apart.
type workflowNode struct {
	fields map[string]json.RawMessage
	inputs map[string]json.RawMessage
}

func readNodes(wf json.RawMessage) (map[string]workflowNode, error) {
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(wf, &raw); err != nil {
		return nil, err
	}
	nodes := make(map[string]workflowNode, len(raw))
	for id, f := range raw {
		n := workflowNode{fields: f}
		if err := json.Unmarshal(f["inputs"], &n.inputs); err != nil && len(f["inputs"]) > 0 {
			return nil, fmt.Errorf("node %s: inputs: %w", id, err)
		}
		nodes[id] = n
	}
	return nodes, nil
}

// inputOf is the input name a node input refers to: a string that is
// exactly "input:<name>", name being a valid input name (so a prompt
// such as "input: a cat" is no reference).
func inputOf(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	name, ok := strings.CutPrefix(s, inputRef)
	return name, ok && inputNames.MatchString(name)
}

// checkInputRefs says what is wrong with how the workflow refers to the
// job's inputs: a name it refers to that the job has no file of, or a
// file it never refers to.
func checkInputRefs(wf json.RawMessage, ins []*inputFile) string {
	nodes, err := readNodes(wf)
	if err != nil {
		return "" // checkWorkflow has said it
	}
	have := map[string]bool{}
	var names []string
	for _, in := range ins {
		have[in.Name] = false
		names = append(names, in.Name)
	}
	for _, id := range sortedKeys(nodes) {
		for _, k := range sortedKeys(nodes[id].inputs) {
			name, ok := inputOf(nodes[id].inputs[k])
			if !ok {
				continue
			}
			if _, known := have[name]; !known {
				return fmt.Sprintf("node %s's input %s refers to input %s, but the job has no input file of that name (it has: %s); send the file as a part named %s, or fix the name",
					catalog.Bounded(id), catalog.Bounded(k), catalog.Bounded(name), orNone(names), catalog.Bounded(name))
			}
			have[name] = true
		}
	}
	for _, n := range names {
		if !have[n] {
			return fmt.Sprintf("the input file %s is not used by the workflow: refer to it as \"input:%s\" in a node's input (such as LoadImage's image)", n, n)
		}
	}
	return ""
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// bindInputs is the workflow with each "input:<name>" replaced by the
// name the file was uploaded under.
func bindInputs(wf json.RawMessage, uploaded map[string]string) (json.RawMessage, error) {
	nodes, err := readNodes(wf)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]json.RawMessage, len(nodes))
	for id, n := range nodes {
		for k, v := range n.inputs {
			// A reference to a name the job has no file of was refused
			// when the job was queued; an Images API prompt may look like
			// one, and is left as it is.
			if name, ok := inputOf(v); ok && uploaded[name] != "" {
				n.inputs[k], _ = json.Marshal(uploaded[name])
			}
		}
		if n.inputs != nil {
			n.fields["inputs"], _ = json.Marshal(n.inputs)
		}
		out[id] = n.fields
	}
	return json.Marshal(out)
}

// keepInputs writes a new job's input files to its folder.
func (s *service) keepInputs(j *job, ins []*inputFile) error {
	if len(ins) == 0 {
		return nil
	}
	dir := filepath.Join(s.dir, j.ID, "inputs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, in := range ins {
		if err := os.WriteFile(filepath.Join(dir, in.Name), in.data, 0o600); err != nil {
			return err
		}
		kept := *in
		kept.data = nil
		j.Inputs = append(j.Inputs, kept)
	}
	return nil
}

// removeJobFiles removes the folder of a job that was not queued.
func (s *service) removeJobFiles(id string) { _ = os.RemoveAll(filepath.Join(s.dir, id)) }

// uploadInputs uploads the job's input files to the replica and returns
// its workflow bound to their names there: llmgw-<job>-<name><ext>.
func (s *service) uploadInputs(j *job, up func(name string, data []byte) (string, error)) (json.RawMessage, error) {
	if len(j.Inputs) == 0 {
		return j.Workflow, nil
	}
	names := map[string]string{}
	for _, in := range j.Inputs {
		b, err := os.ReadFile(filepath.Join(s.dir, j.ID, "inputs", in.Name))
		if err != nil {
			return nil, fmt.Errorf("reading the job's input %s: %w", in.Name, err)
		}
		_, ext, _, _, _ := pictureInfo(b)
		got, err := up("llmgw-"+j.ID+"-"+strings.TrimSuffix(in.Name, filepath.Ext(in.Name))+ext, b)
		if err != nil {
			return nil, err
		}
		names[in.Name] = got
	}
	return bindInputs(j.Workflow, names)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
