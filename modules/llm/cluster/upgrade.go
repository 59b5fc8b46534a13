package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/llmgw/llmgw/release"
)

// UpgradePath is the node-to-node route by which a node hands another a
// release that "llmgw ctl cluster upgrade" sent it (the app's
// node_upgrade.go serves it).
const UpgradePath = "/node/upgrade"

// TrustedKeys are the keys a release sent to this node may be signed by:
// llmgw's own and the config's release_key lines.
func (c *ClusterConfig) TrustedKeys() ([]release.PublicKey, error) {
	project, err := release.ParsePublicKey(release.ProjectKey)
	if err != nil {
		return nil, err
	}
	keys := []release.PublicKey{project}
	for _, s := range c.ReleaseKeys {
		k, err := release.ParsePublicKey(s)
		if err != nil {
			return nil, fmt.Errorf("cluster: release_key %q: %v; give a minisign public key (the RW… line of its .pub file)", s, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// PeerSend sends body (of contentType) to another node's node-to-node
// endpoint at path as it is read, and returns the answer's body; an
// answer other than 200 is an error with the node's message.
func (m *Member) PeerSend(ctx context.Context, addr, path, contentType string, body io.Reader) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := (&http.Client{Transport: m.transport}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("reaching the node at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return raw, fmt.Errorf("the node at %s answered %s: %s", addr, resp.Status, bytes.TrimSpace(raw[:min(len(raw), 512)]))
	}
	return raw, nil
}

// TrustedKeys are the keys this node accepts releases signed by.
func (m *Member) TrustedKeys() []release.PublicKey {
	keys, _ := m.cfg.TrustedKeys() // checked by Provision
	return keys
}

// PeerAddr is the node-to-node address of the live node name.
func (m *Member) PeerAddr(name string) (string, bool) {
	for _, t := range m.LiveNodes() {
		if t.Name == name {
			return t.Addr, true
		}
	}
	return "", false
}
