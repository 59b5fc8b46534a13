// Package comfy is a client of ComfyUI's HTTP and WebSocket API: it runs
// one workflow (API format) on a server and follows it to its end through
// the server's events, then lists and fetches its outputs. It has no
// Caddy in it.
package comfy

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// Progress is where a running workflow is: the node running (its id and
// class), its step of steps when it samples, and the nodes done of
// those to run.
type Progress struct {
	Node, Class string
	Step, Steps int
	Done, Nodes int
}

// Fraction is the share of the workflow done, 0 to 1.
func (p Progress) Fraction() float64 {
	if p.Nodes == 0 {
		return 0
	}
	f := float64(p.Done)
	if p.Steps > 0 {
		f += float64(p.Step) / float64(p.Steps)
	}
	return min(f/float64(p.Nodes), 1)
}

// Output is one file a workflow wrote: the node that wrote it and where
// the server keeps it.
type Output struct {
	Node      string `json:"node"`
	Kind      string `json:"kind"` // images, 3d, gifs, video …
	Filename  string `json:"filename"`
	Subfolder string `json:"subfolder"`
	Type      string `json:"type"`
}

// RefusedError is a workflow the server refused before running it: its
// error and the nodes' errors, as the server gave them.
type RefusedError struct {
	Type, Message, Details string
	NodeErrors             json.RawMessage
}

func (e *RefusedError) Error() string {
	msg := "the workflow was refused: " + e.Message
	if e.Details != "" {
		msg += " (" + e.Details + ")"
	}
	if len(e.NodeErrors) > 2 && string(e.NodeErrors) != "null" {
		msg += "; node errors: " + string(e.NodeErrors)
	}
	return msg
}

// NodeError is a workflow that failed on a node while it ran.
type NodeError struct {
	Node, Class, Message string
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("node %s (%s) failed: %s", e.Node, e.Class, e.Message)
}

// ErrInterrupted ends a workflow the server interrupted.
var ErrInterrupted = errors.New("the workflow was interrupted")

// Preview is a preview picture the server sent while a workflow ran
// (servers started with a --preview-method send one per sampler step):
// its bytes, their type (image/jpeg or image/png), and where the
// workflow was when it came.
type Preview struct {
	Image       []byte
	ContentType string
	Progress    Progress
}

// Client runs workflows on one server.
type Client struct {
	Base string       // http://host:port, no trailing slash
	HTTP *http.Client // default: http.DefaultClient
	ID   string       // the client id the server's events are addressed to
	// Previews, when set, is called with each preview picture the server
	// sends while Run runs (its binary WebSocket messages).
	Previews func(Preview)
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Run runs workflow to its end: it connects to the events first, queues
// the workflow, calls progress with each change, and returns the files
// it wrote. A cancelled ctx interrupts it on the server.
func (c *Client) Run(ctx context.Context, workflow json.RawMessage, progress func(Progress)) ([]Output, error) {
	wsURL := "ws" + strings.TrimPrefix(c.Base, "http") + "/ws?clientId=" + url.QueryEscape(c.ID)
	ws, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: c.http()})
	if err != nil {
		return nil, fmt.Errorf("connecting to the server's events: %w", err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(64 << 20) // preview pictures come as binary messages
	// The server's first message (its status, with our id) says it has
	// registered us: events of the prompt queued after it reach us.
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, _, err = ws.Read(hctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("waiting for the server's first event: %w", err)
	}
	id, err := c.queue(ctx, workflow)
	if err != nil {
		return nil, err
	}
	nodes := countNodes(workflow)
	err = c.follow(ctx, ws, id, nodes, progress)
	if ctx.Err() != nil {
		ictx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Interrupt(ictx, id)
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	return c.outputs(ctx, id)
}

// queue posts the workflow and returns its prompt id.
func (c *Client) queue(ctx context.Context, workflow json.RawMessage) (string, error) {
	body, _ := json.Marshal(map[string]any{"prompt": workflow, "client_id": c.ID})
	var out struct {
		PromptID   string          `json:"prompt_id"`
		NodeErrors json.RawMessage `json:"node_errors"`
		Error      json.RawMessage `json:"error"`
	}
	code, err := c.call(ctx, http.MethodPost, "/prompt", body, &out)
	if err != nil {
		return "", err
	}
	if code == http.StatusBadRequest || out.PromptID == "" {
		var e struct{ Type, Message, Details string }
		if json.Unmarshal(out.Error, &e) != nil {
			var s string
			_ = json.Unmarshal(out.Error, &s)
			e.Message = s
		}
		return "", &RefusedError{Type: e.Type, Message: e.Message, Details: e.Details, NodeErrors: out.NodeErrors}
	}
	return out.PromptID, nil
}

// follow reads the server's events for prompt id until it ends.
func (c *Client) follow(ctx context.Context, ws *websocket.Conn, id string, nodes int, progress func(Progress)) error {
	p := Progress{Nodes: nodes}
	seen := map[string]bool{}
	for {
		typ, b, err := ws.Read(ctx)
		if err != nil {
			return fmt.Errorf("the server's events ended before the workflow did: %w", err)
		}
		if typ != websocket.MessageText {
			if pv, ok := parsePreview(b); ok && c.Previews != nil {
				pv.Progress = p
				c.Previews(pv)
			}
			continue
		}
		var ev struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal(b, &ev) != nil {
			continue
		}
		var d struct {
			PromptID  string   `json:"prompt_id"`
			Node      *string  `json:"node"`
			Value     int      `json:"value"`
			Max       int      `json:"max"`
			Nodes     []string `json:"nodes"`
			NodeID    any      `json:"node_id"`
			NodeType  string   `json:"node_type"`
			Exception string   `json:"exception_message"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.PromptID != id {
			continue
		}
		switch ev.Type {
		case "execution_cached":
			for _, n := range d.Nodes {
				seen[n] = true
			}
			p.Done = len(seen)
		case "executing":
			if d.Node == nil {
				return nil // the end, as older servers say it
			}
			if p.Node != "" {
				seen[p.Node] = true
			}
			p.Node, p.Step, p.Steps, p.Done = *d.Node, 0, 0, len(seen)
		case "progress":
			p.Step, p.Steps = d.Value, d.Max
		case "execution_success":
			return nil
		case "execution_error":
			return &NodeError{Node: fmt.Sprint(d.NodeID), Class: d.NodeType, Message: d.Exception}
		case "execution_interrupted":
			return ErrInterrupted
		default:
			continue
		}
		if progress != nil {
			progress(p)
		}
	}
}

// Binary message types of ComfyUI's /ws, and the image formats of a
// PREVIEW_IMAGE message.
const (
	binPreviewImage             = 1
	binPreviewImageWithMetadata = 4
	formatJPEG                  = 1
	formatPNG                   = 2
)

// parsePreview reads a binary message: a 4-byte big-endian event type;
// for PREVIEW_IMAGE a 4-byte format (1 JPEG, 2 PNG) and the picture; for
// PREVIEW_IMAGE_WITH_METADATA a 4-byte length, JSON metadata (its
// image_type) and the picture.
func parsePreview(b []byte) (Preview, bool) {
	if len(b) < 8 {
		return Preview{}, false
	}
	switch binary.BigEndian.Uint32(b) {
	case binPreviewImage:
		ct := map[uint32]string{formatJPEG: "image/jpeg", formatPNG: "image/png"}[binary.BigEndian.Uint32(b[4:])]
		return Preview{Image: b[8:], ContentType: ct}, ct != ""
	case binPreviewImageWithMetadata:
		n := int(binary.BigEndian.Uint32(b[4:]))
		if n < 0 || 8+n > len(b) {
			return Preview{}, false
		}
		var meta struct {
			ImageType string `json:"image_type"`
		}
		_ = json.Unmarshal(b[8:8+n], &meta)
		ct := map[string]string{"image/jpeg": "image/jpeg", "image/png": "image/png", "image/webp": "image/webp"}[meta.ImageType]
		return Preview{Image: b[8+n:], ContentType: ct}, ct != ""
	}
	return Preview{}, false
}

// Upload stores a picture on the server (its input folder, replacing a
// file of that name) and returns the name a LoadImage node gives to load
// it.
func (c *Client) Upload(ctx context.Context, name string, data []byte) (string, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("image", name)
	if err == nil {
		_, err = fw.Write(data)
	}
	if err == nil {
		err = mw.WriteField("overwrite", "true")
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/upload/image", &body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.http().Do(req)
	if err != nil {
		return "", fmt.Errorf("uploading %s: %w", name, err)
	}
	defer resp.Body.Close()
	var out struct{ Name, Subfolder string }
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return "", &RefusedError{Message: fmt.Sprintf("uploading %s: %s: %s", name, resp.Status, bytes.TrimSpace(b))}
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.Name == "" {
		return "", fmt.Errorf("uploading %s: the server answered %s: %s", name, resp.Status, bytes.TrimSpace(b))
	}
	if out.Subfolder != "" {
		return out.Subfolder + "/" + out.Name, nil
	}
	return out.Name, nil
}

// outputs lists the files the prompt wrote, from its history.
func (c *Client) outputs(ctx context.Context, id string) ([]Output, error) {
	var hist map[string]struct {
		Outputs map[string]map[string]json.RawMessage `json:"outputs"`
	}
	if _, err := c.call(ctx, http.MethodGet, "/history/"+url.PathEscape(id), nil, &hist); err != nil {
		return nil, err
	}
	h, ok := hist[id]
	if !ok {
		return nil, fmt.Errorf("the server has no history of prompt %s", id)
	}
	var out []Output
	for _, node := range sortedKeys(h.Outputs) {
		for _, kind := range sortedKeys(h.Outputs[node]) {
			var files []Output
			if json.Unmarshal(h.Outputs[node][kind], &files) != nil {
				continue // not a list of files (text, numbers)
			}
			for _, f := range files {
				if f.Filename != "" && f.Type != "temp" {
					f.Node, f.Kind = node, kind
					out = append(out, f)
				}
			}
		}
	}
	return out, nil
}

// Fetch opens one output file.
func (c *Client) Fetch(ctx context.Context, o Output) (io.ReadCloser, string, error) {
	q := url.Values{"filename": {o.Filename}, "subfolder": {o.Subfolder}, "type": {o.Type}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/view?"+q.Encode(), nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, "", fmt.Errorf("fetching output %s: the server answered %s", o.Filename, resp.Status)
	}
	return resp.Body, resp.Header.Get("Content-Type"), nil
}

// Interrupt stops prompt id if it is the one running.
func (c *Client) Interrupt(ctx context.Context, id string) error {
	body, _ := json.Marshal(map[string]string{"prompt_id": id})
	_, err := c.call(ctx, http.MethodPost, "/interrupt", body, nil)
	return err
}

// call sends one request and decodes a JSON answer into out.
func (c *Client) call(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if resp.StatusCode >= 500 {
		return resp.StatusCode, fmt.Errorf("%s %s: the server answered %s", method, path, resp.Status)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil && resp.StatusCode == http.StatusOK {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// countNodes is how many nodes the workflow has.
func countNodes(workflow json.RawMessage) int {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(workflow, &m)
	return len(m)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
