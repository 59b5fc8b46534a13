package simimage

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"image"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// value is what flows along a link: a model part, conditioning, a latent,
// pictures, a voxel grid or a mesh, reduced to its size and a hash of
// everything that made it.
type value struct {
	kind          string
	width, height int
	batch         int
	hash          uint64
	// pixels is the picture an image to image workflow started from
	// (LoadImage's), carried to the pictures it draws; keep is the share
	// of it they keep (1 - denoise/2).
	pixels *image.NRGBA
	keep   float64
}

// run is one prompt being executed.
type run struct {
	id      string
	number  int
	prompt  map[string]node
	outputs []string
	client  string
	extra   json.RawMessage
	raw     json.RawMessage // the prompt as given, for /queue and /history
	cancel  context.CancelFunc
}

// errInterrupted ends a run that POST /interrupt stopped.
var errInterrupted = errors.New("interrupted")

// nodeFailure is a node that failed while the prompt ran.
type nodeFailure struct {
	node, class string
	err         error
}

func (f *nodeFailure) Error() string { return f.class + ": " + f.err.Error() }

// execute runs the prompt's nodes in order, telling the client as
// ComfyUI does, and returns each output node's output.
func (s *Server) execute(ctx context.Context, r *run) (map[string]map[string]any, []string, error) {
	vals := map[string][]value{}
	outs := map[string]map[string]any{}
	var done []string
	for _, id := range order(r.prompt, r.outputs) {
		n := r.prompt[id]
		s.send(r.client, "executing", map[string]any{"node": id, "display_node": id, "prompt_id": r.id})
		res, out, err := s.runNode(ctx, r, id, n, vals)
		if err != nil {
			if errors.Is(err, errInterrupted) {
				return outs, done, err
			}
			return outs, done, &nodeFailure{node: id, class: n.ClassType, err: err}
		}
		vals[id], done = res, append(done, id)
		if out != nil {
			outs[id] = out
			s.send(r.client, "executed", map[string]any{"node": id, "display_node": id, "output": out, "prompt_id": r.id})
		}
	}
	return outs, done, nil
}

// runNode runs one node: its outputs, and what an output node shows.
func (s *Server) runNode(ctx context.Context, r *run, id string, n node, vals map[string][]value) ([]value, map[string]any, error) {
	in := func(name string) value {
		if l, ok := asLink(n.Inputs[name]); ok && l.slot < len(vals[l.from]) {
			return vals[l.from][l.slot]
		}
		return value{hash: hashOf(string(n.Inputs[name]))}
	}
	h := hashOf(n.ClassType)
	for _, name := range sortedInputs(n) {
		h = mix(h, in(name).hash)
	}
	switch n.ClassType {
	case "CheckpointLoaderSimple":
		return []value{{kind: "MODEL", hash: h}, {kind: "CLIP", hash: mix(h, 1)}, {kind: "VAE", hash: mix(h, 2)}}, nil, nil
	case "EmptyLatentImage":
		w, hh, b := intInput(n, "width", 512), intInput(n, "height", 512), intInput(n, "batch_size", 1)
		if w < 16 || hh < 16 || w > 16384 || hh > 16384 || b < 1 || b > 64 {
			return nil, nil, fmt.Errorf("width and height must be 16 to 16384 and batch_size 1 to 64 (got %dx%d, %d)", w, hh, b)
		}
		return []value{{kind: "LATENT", width: w, height: hh, batch: b, hash: h}}, nil, nil
	case "EmptyLatentHunyuan3Dv2":
		return []value{{kind: "LATENT", width: intInput(n, "resolution", 3072), batch: intInput(n, "batch_size", 1), hash: h}}, nil, nil
	case "KSampler":
		lat := in("latent_image")
		out := value{kind: "LATENT", width: lat.width, height: lat.height, batch: lat.batch, hash: h, pixels: lat.pixels}
		if lat.pixels != nil {
			out.keep = 1 - min(max(floatInput(n, "denoise", 1), 0), 1)/2
		}
		if err := s.sample(ctx, r, id, intInput(n, "steps", 20), out); err != nil {
			return nil, nil, err
		}
		return []value{out}, nil, nil
	case "VAEDecode", "VAEEncode", "VAEDecodeHunyuan3D", "VoxelToMeshBasic":
		src := in(map[string]string{"VAEDecode": "samples", "VAEEncode": "pixels", "VAEDecodeHunyuan3D": "samples", "VoxelToMeshBasic": "voxel"}[n.ClassType])
		kind := classes[n.ClassType].outputs[0]
		return []value{{kind: kind, width: src.width, height: src.height, batch: max(src.batch, 1), hash: h, pixels: src.pixels, keep: src.keep}}, nil, nil
	case "LoadImage":
		return s.loadImage(n, h)
	case "ImageScale", "ImageBlend", "RepeatLatentBatch", "SetLatentNoiseMask":
		return transform(n, in, h)
	case "SaveImage", "PreviewImage":
		return s.saveImages(n, in("images"), h)
	case "SaveGLB":
		return s.saveMesh(n, in("mesh"), h)
	}
	outs := classes[n.ClassType].outputs
	res := make([]value, len(outs))
	for i, k := range outs {
		res[i] = value{kind: k, hash: mix(h, uint64(i))}
	}
	return res, nil, nil
}

// sample takes steps steps of the set step time, each a progress event;
// the cancel of ctx (an interrupt) ends it.
func (s *Server) sample(ctx context.Context, r *run, id string, steps int, lat value) error {
	steps = min(max(steps, 1), 10000)
	for i := 1; i <= steps; i++ {
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-time.After(s.cfg.StepTime):
		}
		if s.cfg.FailStep > 0 && i == s.cfg.FailStep {
			return fmt.Errorf("simulated failure at step %d (the replica's fail_step)", i)
		}
		s.send(r.client, "progress", map[string]any{"value": i, "max": steps, "prompt_id": r.id, "node": id})
		if s.cfg.Previews && lat.width > 0 {
			s.deliver(r.client, wsMessage{binary: true, b: previewFrame(lat, i, steps)})
		}
	}
	return nil
}

// loadImage reads an uploaded picture from the input folder: its pixels
// (PNG and JPEG; of WebP only its size) and a hash of its bytes, so
// that what is drawn from it depends on it.
func (s *Server) loadImage(n node, h uint64) ([]value, map[string]any, error) {
	var name string
	if json.Unmarshal(n.Inputs["image"], &name) != nil || name == "" || strings.Contains(name, "..") {
		return nil, nil, fmt.Errorf("Invalid image file: %s", n.Inputs["image"])
	}
	b, err := os.ReadFile(filepath.Join(s.cfg.Dir, "input", filepath.FromSlash(name)))
	if err != nil {
		return nil, nil, fmt.Errorf("Invalid image file: %s", name)
	}
	pix, w, hh, err := decodePicture(b)
	if err != nil {
		return nil, nil, fmt.Errorf("Invalid image file: %s: %v", name, err)
	}
	h = mix(h, hashOf(string(b)))
	return []value{{kind: "IMAGE", width: w, height: hh, batch: 1, hash: h, pixels: pix, keep: 1}, {kind: "MASK", hash: mix(h, 1)}}, nil, nil
}

// saveImages draws the pictures and writes them: to the output folder
// (SaveImage) or the temp folder (PreviewImage).
func (s *Server) saveImages(n node, img value, h uint64) ([]value, map[string]any, error) {
	if img.width == 0 || img.height == 0 {
		return nil, nil, errors.New("images: no picture reaches this node (link it to a VAEDecode or LoadImage)")
	}
	folder, prefix := "output", stringInput(n, "filename_prefix", "ComfyUI")
	if n.ClassType == "PreviewImage" {
		folder, prefix = "temp", "ComfyUI_temp"
	}
	var images []map[string]any
	for i := range img.batch {
		name, sub, err := s.nextFile(folder, prefix, ".png")
		if err != nil {
			return nil, nil, err
		}
		if err := writePNG(filepath.Join(s.cfg.Dir, folder, sub, name), paint(img, i)); err != nil {
			return nil, nil, err
		}
		images = append(images, map[string]any{"filename": name, "subfolder": sub, "type": folder})
	}
	return nil, map[string]any{"images": images}, nil
}

// saveMesh writes a small GLB mesh to the output folder.
func (s *Server) saveMesh(n node, mesh value, h uint64) ([]value, map[string]any, error) {
	if mesh.kind != "MESH" {
		return nil, nil, errors.New("mesh: no mesh reaches this node (link it to a VoxelToMeshBasic)")
	}
	var files []map[string]any
	for i := range max(mesh.batch, 1) {
		name, sub, err := s.nextFile("output", stringInput(n, "filename_prefix", "mesh/ComfyUI"), ".glb")
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(s.cfg.Dir, "output", sub, name), glb(mix(mesh.hash, uint64(i))), 0o644); err != nil {
			return nil, nil, err
		}
		files = append(files, map[string]any{"filename": name, "subfolder": sub, "type": "output"})
	}
	return nil, map[string]any{"3d": files}, nil
}

// nextFile names the next file of prefix (which may hold a subfolder) in
// folder, as ComfyUI does: <prefix>_00001_.png.
func (s *Server) nextFile(folder, prefix, ext string) (name, sub string, err error) {
	sub, base := filepath.Split(filepath.ToSlash(prefix))
	sub = strings.Trim(sub, "/")
	if base == "" || strings.Contains(prefix, "..") || filepath.IsAbs(prefix) {
		return "", "", fmt.Errorf("filename_prefix %q: give a name, optionally under a subfolder (mesh/ComfyUI)", prefix)
	}
	if err := os.MkdirAll(filepath.Join(s.cfg.Dir, folder, sub), 0o755); err != nil {
		return "", "", err
	}
	s.mu.Lock()
	s.counter++
	c := s.counter
	s.mu.Unlock()
	return fmt.Sprintf("%s_%05d_%s", base, c, ext), sub, nil
}

// hashOf is the FNV-1a hash of s.
func hashOf(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// mix combines two hashes.
func mix(a, b uint64) uint64 {
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], a)
	binary.LittleEndian.PutUint64(buf[8:], b)
	h := fnv.New64a()
	h.Write(buf[:])
	return h.Sum64()
}

// sortedInputs are a node's input names, sorted.
func sortedInputs(n node) []string {
	names := make([]string, 0, len(n.Inputs))
	for k := range n.Inputs {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// intInput reads a number input, def when it is absent or a link.
func intInput(n node, name string, def int) int {
	var f float64
	if json.Unmarshal(n.Inputs[name], &f) != nil {
		return def
	}
	return int(f)
}

// floatInput reads a number input, def when it is absent or a link.
func floatInput(n node, name string, def float64) float64 {
	var f float64
	if json.Unmarshal(n.Inputs[name], &f) != nil {
		return def
	}
	return f
}

// stringInput reads a text input, def when it is absent or a link.
func stringInput(n node, name, def string) string {
	var s string
	if json.Unmarshal(n.Inputs[name], &s) != nil || s == "" {
		return def
	}
	return s
}
