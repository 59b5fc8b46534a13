package comfy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// pollEvery is how often RunPolled reads the server's history.
const pollEvery = 200 * time.Millisecond

// RunPolled runs workflow without the server's events: it queues it and
// reads GET /history/{id} until the workflow ends. It serves a server
// reached through a hop that carries no WebSocket (a replica on another
// node); progress is told when the workflow ends only. A cancelled ctx
// interrupts it on the server.
func (c *Client) RunPolled(ctx context.Context, workflow json.RawMessage, progress func(Progress)) ([]Output, error) {
	id, err := c.queue(ctx, workflow)
	if err != nil {
		return nil, err
	}
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			ictx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = c.Interrupt(ictx, id)
			return nil, ctx.Err()
		case <-t.C:
		}
		done, err := c.ended(ctx, id)
		if err != nil || !done {
			if err != nil && ctx.Err() == nil {
				return nil, err
			}
			continue
		}
		if progress != nil {
			n := countNodes(workflow)
			progress(Progress{Nodes: n, Done: n})
		}
		return c.outputs(ctx, id)
	}
}

// ended reads prompt id's history: false while it has none (queued or
// running), true once it succeeded, its error once it failed.
func (c *Client) ended(ctx context.Context, id string) (bool, error) {
	var hist map[string]struct {
		Status struct {
			StatusStr string              `json:"status_str"`
			Messages  [][]json.RawMessage `json:"messages"`
		} `json:"status"`
	}
	code, err := c.call(ctx, http.MethodGet, "/history/"+url.PathEscape(id), nil, &hist)
	if err != nil {
		return false, err
	}
	if code != http.StatusOK {
		return false, fmt.Errorf("GET /history/%s: the server answered %d", id, code)
	}
	h, ok := hist[id]
	if !ok || h.Status.StatusStr == "" {
		return false, nil
	}
	if h.Status.StatusStr == "success" {
		return true, nil
	}
	for _, m := range h.Status.Messages {
		var kind string
		if len(m) != 2 || json.Unmarshal(m[0], &kind) != nil {
			continue
		}
		var d struct {
			NodeID    any    `json:"node_id"`
			NodeType  string `json:"node_type"`
			Exception string `json:"exception_message"`
		}
		_ = json.Unmarshal(m[1], &d)
		switch kind {
		case "execution_error":
			return true, &NodeError{Node: fmt.Sprint(d.NodeID), Class: d.NodeType, Message: d.Exception}
		case "execution_interrupted":
			return true, ErrInterrupted
		}
	}
	return true, fmt.Errorf("the workflow ended with status %s", h.Status.StatusStr)
}
