package comfy

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
)

// ModelFiles lists the model files the server found, by folder
// (checkpoints, loras, vae, …): ComfyUI's GET /models, then GET
// /models/{folder} for each.
func (c *Client) ModelFiles(ctx context.Context) (map[string][]string, error) {
	var folders []string
	if code, err := c.call(ctx, http.MethodGet, "/models", nil, &folders); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("GET /models: %d %v", code, err)
	}
	sort.Strings(folders)
	out := make(map[string][]string, len(folders))
	for _, f := range folders {
		var files []string
		if code, err := c.call(ctx, http.MethodGet, "/models/"+url.PathEscape(f), nil, &files); err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("GET /models/%s: %d %v", f, code, err)
		}
		sort.Strings(files)
		out[f] = files
	}
	return out, nil
}
