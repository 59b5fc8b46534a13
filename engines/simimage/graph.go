package simimage

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
)

// node is one node of a workflow in ComfyUI's API format: its class and
// its inputs, each a value or a link [node id, output index].
type node struct {
	ClassType string                     `json:"class_type"`
	Inputs    map[string]json.RawMessage `json:"inputs"`
}

// link is an input taken from another node's output.
type link struct {
	from string
	slot int
}

// asLink reads an input that is a link, as ComfyUI writes them: ["4", 0].
func asLink(raw json.RawMessage) (link, bool) {
	var pair []json.RawMessage
	if json.Unmarshal(raw, &pair) != nil || len(pair) != 2 {
		return link{}, false
	}
	var id string
	if json.Unmarshal(pair[0], &id) != nil {
		var n json.Number
		if json.Unmarshal(pair[0], &n) != nil {
			return link{}, false
		}
		id = n.String()
	}
	var slot int
	if json.Unmarshal(pair[1], &slot) != nil {
		return link{}, false
	}
	return link{from: id, slot: slot}, true
}

// class is what the simulator knows of a node class: its inputs, the
// types of its outputs, whether it is an output node, and whether it
// samples (it takes steps, each a progress event).
type class struct {
	required []string
	optional []string
	outputs  []string
	output   bool
	category string
}

// classes are the node classes the simulator runs: those of text to
// image, image to image and text to 3D workflows.
var classes = map[string]class{
	"CheckpointLoaderSimple": {required: []string{"ckpt_name"}, outputs: []string{"MODEL", "CLIP", "VAE"}, category: "loaders"},
	"CLIPTextEncode":         {required: []string{"text", "clip"}, outputs: []string{"CONDITIONING"}, category: "conditioning"},
	"EmptyLatentImage":       {required: []string{"width", "height", "batch_size"}, outputs: []string{"LATENT"}, category: "latent"},
	"KSampler": {required: []string{"model", "seed", "steps", "cfg", "sampler_name", "scheduler", "positive", "negative", "latent_image", "denoise"},
		outputs: []string{"LATENT"}, category: "sampling"},
	"VAEDecode":                 {required: []string{"samples", "vae"}, outputs: []string{"IMAGE"}, category: "latent"},
	"VAEEncode":                 {required: []string{"pixels", "vae"}, outputs: []string{"LATENT"}, category: "latent"},
	"LoadImage":                 {required: []string{"image"}, outputs: []string{"IMAGE", "MASK"}, category: "image"},
	"ImageScale":                {required: []string{"image", "upscale_method", "width", "height", "crop"}, outputs: []string{"IMAGE"}, category: "image/upscaling"},
	"ImageBlend":                {required: []string{"image1", "image2", "blend_factor", "blend_mode"}, outputs: []string{"IMAGE"}, category: "image/postprocessing"},
	"RepeatLatentBatch":         {required: []string{"samples", "amount"}, outputs: []string{"LATENT"}, category: "latent/batch"},
	"SetLatentNoiseMask":        {required: []string{"samples", "mask"}, outputs: []string{"LATENT"}, category: "latent/inpaint"},
	"SaveImage":                 {required: []string{"images"}, optional: []string{"filename_prefix"}, output: true, category: "image"},
	"PreviewImage":              {required: []string{"images"}, output: true, category: "image"},
	"EmptyLatentHunyuan3Dv2":    {required: []string{"resolution", "batch_size"}, outputs: []string{"LATENT"}, category: "latent/3d"},
	"VAEDecodeHunyuan3D":        {required: []string{"samples", "vae", "num_chunks", "octree_resolution"}, outputs: []string{"VOXEL"}, category: "latent/3d"},
	"VoxelToMeshBasic":          {required: []string{"voxel", "threshold"}, outputs: []string{"MESH"}, category: "3d"},
	"SaveGLB":                   {required: []string{"mesh", "filename_prefix"}, output: true, category: "3d"},
	"CLIPVisionLoader":          {required: []string{"clip_name"}, outputs: []string{"CLIP_VISION"}, category: "loaders"},
	"ImageOnlyCheckpointLoader": {required: []string{"ckpt_name"}, outputs: []string{"MODEL", "CLIP_VISION", "VAE"}, category: "loaders"},
	"ModelSamplingAuraFlow":     {required: []string{"model", "shift"}, outputs: []string{"MODEL"}, category: "advanced/model"},
	"CLIPVisionEncode":          {required: []string{"clip_vision", "image", "crop"}, outputs: []string{"CLIP_VISION_OUTPUT"}, category: "conditioning"},
	"Hunyuan3Dv2Conditioning":   {required: []string{"clip_vision_output"}, outputs: []string{"CONDITIONING", "CONDITIONING"}, category: "conditioning/3d"},
}

// nodeError is one problem ComfyUI reports for a node of a prompt.
type nodeError struct {
	Type      string         `json:"type"`
	Message   string         `json:"message"`
	Details   string         `json:"details"`
	ExtraInfo map[string]any `json:"extra_info"`
}

// promptError is the answer to a prompt ComfyUI refuses.
type promptError struct {
	Error      nodeError `json:"error"`
	NodeErrors any       `json:"node_errors"`
}

// nodeErrors are a node's problems, as the node_errors of a refusal.
type nodeErrors struct {
	Errors           []nodeError `json:"errors"`
	DependentOutputs []string    `json:"dependent_outputs"`
	ClassType        string      `json:"class_type"`
}

// validate checks a workflow as ComfyUI does before queueing it: every
// class is known, every required input is given, every link names a node
// and an output it has; it returns the output nodes to run, in order.
func validate(prompt map[string]node) ([]string, *promptError) {
	for _, id := range sortedIDs(prompt) {
		if _, ok := classes[prompt[id].ClassType]; !ok {
			return nil, &promptError{Error: nodeError{Type: "invalid_prompt",
				Message: fmt.Sprintf("Cannot execute because node %s does not exist.", prompt[id].ClassType),
				Details: "Node ID '#" + id + "'", ExtraInfo: map[string]any{}}, NodeErrors: map[string]any{}}
		}
	}
	var outputs []string
	for _, id := range sortedIDs(prompt) {
		if classes[prompt[id].ClassType].output {
			outputs = append(outputs, id)
		}
	}
	if len(outputs) == 0 {
		return nil, &promptError{Error: nodeError{Type: "prompt_no_outputs", Message: "Prompt has no outputs",
			ExtraInfo: map[string]any{}}, NodeErrors: []any{}}
	}
	bad := map[string]*nodeErrors{}
	for _, id := range sortedIDs(prompt) {
		if errs := checkInputs(prompt, prompt[id]); len(errs) > 0 {
			bad[id] = &nodeErrors{Errors: errs, ClassType: prompt[id].ClassType, DependentOutputs: outputs}
		}
	}
	if len(bad) > 0 {
		return nil, &promptError{Error: nodeError{Type: "prompt_outputs_failed_validation", Message: "Prompt outputs failed validation",
			ExtraInfo: map[string]any{}}, NodeErrors: bad}
	}
	if cycle := findCycle(prompt); cycle != "" {
		return nil, &promptError{Error: nodeError{Type: "invalid_prompt", Message: "Prompt has a dependency cycle",
			Details: "Node ID '#" + cycle + "'", ExtraInfo: map[string]any{}}, NodeErrors: map[string]any{}}
	}
	return outputs, nil
}

// checkInputs lists what is wrong with one node's inputs.
func checkInputs(prompt map[string]node, n node) []nodeError {
	var errs []nodeError
	c := classes[n.ClassType]
	for _, name := range c.required {
		if _, ok := n.Inputs[name]; !ok {
			errs = append(errs, nodeError{Type: "required_input_missing", Message: "Required input is missing",
				Details: name, ExtraInfo: map[string]any{"input_name": name}})
		}
	}
	for name, raw := range n.Inputs {
		l, ok := asLink(raw)
		if !ok {
			continue
		}
		src, exists := prompt[l.from]
		if !exists || l.slot < 0 || l.slot >= len(classes[src.ClassType].outputs) {
			errs = append(errs, nodeError{Type: "bad_linked_input", Message: "Bad linked input, must be a length-2 list of [string, int]",
				Details: fmt.Sprintf("%s, %s", name, raw), ExtraInfo: map[string]any{"input_name": name}})
		}
	}
	return errs
}

// findCycle returns a node on a cycle of links, or "".
func findCycle(prompt map[string]node) string {
	state := map[string]int{} // 1: on the path, 2: done
	var visit func(id string) string
	visit = func(id string) string {
		switch state[id] {
		case 1:
			return id
		case 2:
			return ""
		}
		state[id] = 1
		for _, dep := range deps(prompt[id]) {
			if c := visit(dep); c != "" {
				return c
			}
		}
		state[id] = 2
		return ""
	}
	for _, id := range sortedIDs(prompt) {
		if c := visit(id); c != "" {
			return c
		}
	}
	return ""
}

// deps are the nodes a node takes inputs from, sorted.
func deps(n node) []string {
	var out []string
	for _, raw := range n.Inputs {
		if l, ok := asLink(raw); ok && !slices.Contains(out, l.from) {
			out = append(out, l.from)
		}
	}
	sort.Strings(out)
	return out
}

// order is the nodes the outputs need, each after those it takes
// inputs from.
func order(prompt map[string]node, outputs []string) []string {
	var out []string
	seen := map[string]bool{}
	var visit func(id string)
	visit = func(id string) {
		if seen[id] {
			return
		}
		seen[id] = true
		for _, dep := range deps(prompt[id]) {
			visit(dep)
		}
		out = append(out, id)
	}
	for _, id := range outputs {
		visit(id)
	}
	return out
}

// sortedIDs are the prompt's node ids in ComfyUI's order: numerically
// where they are numbers.
func sortedIDs(prompt map[string]node) []string {
	ids := make([]string, 0, len(prompt))
	for id := range prompt {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, errA := strconv.Atoi(ids[i])
		b, errB := strconv.Atoi(ids[j])
		if errA == nil && errB == nil {
			return a < b
		}
		return ids[i] < ids[j]
	})
	return ids
}

// objectInfo describes the node classes as ComfyUI's GET /object_info.
func objectInfo() map[string]any {
	out := map[string]any{}
	for name, c := range classes {
		req, opt := map[string]any{}, map[string]any{}
		for _, in := range c.required {
			req[in] = []any{"*"}
		}
		for _, in := range c.optional {
			opt[in] = []any{"*"}
		}
		outputs := c.outputs
		if outputs == nil {
			outputs = []string{}
		}
		out[name] = map[string]any{"input": map[string]any{"required": req, "optional": opt}, "output": outputs,
			"output_is_list": make([]bool, len(outputs)), "output_name": outputs, "name": name, "display_name": name,
			"description": "", "category": c.category, "output_node": c.output, "python_module": "nodes"}
	}
	return out
}
