package llmctl

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/release"
)

// clusterUpgrade is "llmgw ctl cluster upgrade": a release installed on
// every node, one node at a time.
func (c *ctl) clusterUpgrade(timeout *time.Duration) *cobra.Command {
	u := &upgrader{}
	cmd := &cobra.Command{Use: "upgrade <version|tarball|https URL>", Short: "Upgrades every node to a signed release, one node at a time: drain, replace, restart, wait, undrain",
		Long: `Installs a release on every node of the cluster, one node at a time, the
leader last: the node is drained (its replicas start on the other nodes
first), is sent the release (POST /llm/nodes/<name>/upgrade), checks its
signature with the keys its own config trusts (llmgw's release key and the
cluster block's release_key lines), replaces its binary (keeping the old one
as .previous) and restarts once its open requests end; when its heartbeat
shows the new version, it is undrained and the next node follows.

The release is checked here first (signature, with llmgw's key and --key,
and SHA-256), so a bad one changes nothing. At the first node that fails,
the upgrade stops: the nodes after it stay on their version, and the
failing one is undrained if it did not change. Nodes already on the
release's version are skipped, so running it again goes on where it
stopped. Nodes must be of the platform the tarball is for.`,
		Example: "  $ llmgw ctl cluster upgrade ./llmgw_v0.16.0_linux_amd64.tar.gz\n" +
			"  $ llmgw ctl cluster upgrade v0.16.0 --from https://example.com/llmgw/releases/v0.16.0 --timeout 15m",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return c.upgradeCluster(u, args[0], *timeout) }}
	cmd.Flags().StringVar(&u.from, "from", "", "where the release files are (an https URL or a directory), for a version argument")
	cmd.Flags().StringArrayVar(&u.keys, "key", nil, "a minisign public key file to trust here besides llmgw's release key (the nodes trust their config's)")
	return cmd
}

// upgradeCluster checks the release, then upgrades the nodes in turn.
func (c *ctl) upgradeCluster(u *upgrader, src string, timeout time.Duration) error {
	rel, keys, err := u.fetch(src)
	if err != nil {
		return err
	}
	files := rel.files()
	if err := release.Check(files, keys); err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	st, err := c.clusterNodes()
	if err != nil {
		return err
	}
	to := release.VersionOf(rel.loc.name)
	var done []string
	for _, n := range sortedNodes(st) {
		if n.Version == to {
			c.say("node %s: already on %s", n.Name, to)
			continue
		}
		if err := c.upgradeNode(n, files, to, timeout); err != nil {
			return fmt.Errorf("%w; upgraded before it: %s; the nodes after it are on their version still", err, listOr(done))
		}
		done = append(done, n.Name)
	}
	c.say("cluster upgraded to %s", to)
	return nil
}

// upgradeNode drains n, sends it the release, waits until it runs to and
// undrains it.
func (c *ctl) upgradeNode(n llmapi.NodeInfo, files release.Files, to string, timeout time.Duration) error {
	if err := c.send("POST", "/llm/nodes/"+url.PathEscape(n.Name)+"/drain"); err != nil {
		return fmt.Errorf("node %s: draining: %w", n.Name, err)
	}
	err := c.waitNodes(fmt.Sprintf("node %s: replicas moving off it", n.Name), timeout, func(st llmapi.NodesStatus) (bool, string) {
		r, _ := replicasOn(st, n.Name)
		return r == 0, fmt.Sprintf("%d replicas left", r)
	})
	if err != nil {
		return fmt.Errorf("node %s: %w (it is drained: llmgw ctl node undrain %s)", n.Name, err, n.Name)
	}
	c.say("node %s: installing %s", n.Name, to)
	var out llmapi.NodeUpgrade
	if err := c.upload("/llm/nodes/"+url.PathEscape(n.Name)+"/upgrade", files, &out); err != nil {
		if uerr := c.send("POST", "/llm/nodes/"+url.PathEscape(n.Name)+"/undrain"); uerr != nil {
			return fmt.Errorf("node %s: %w (and undraining it: %v)", n.Name, err, uerr)
		}
		return fmt.Errorf("node %s: %w (it is undrained, on %s still)", n.Name, err, n.Version)
	}
	c.say("node %s: restarting on %s (%s)", n.Name, out.To, out.Restart)
	err = c.waitNodes(fmt.Sprintf("node %s: restarting on %s", n.Name, to), timeout, func(st llmapi.NodesStatus) (bool, string) {
		for _, m := range st.Nodes {
			if m.Name == n.Name {
				return m.Version == to && m.Started.After(n.Started), "running " + m.Version
			}
		}
		return false, "no heartbeat"
	})
	if err != nil {
		return fmt.Errorf("node %s: %w; it stays drained (its old binary is %s.previous: llmgw upgrade --rollback on it)", n.Name, err, out.Binary)
	}
	if err := c.send("POST", "/llm/nodes/"+url.PathEscape(n.Name)+"/undrain"); err != nil {
		return fmt.Errorf("node %s: runs %s but undraining it: %w", n.Name, to, err)
	}
	c.say("node %s: on %s, undrained", n.Name, to)
	return nil
}

// upload POSTs the release files to path as multipart/form-data.
func (c *ctl) upload(path string, f release.Files, out any) error {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, p := range []struct {
		field, file string
		data        []byte
	}{{"sums", "SHA256SUMS", f.Sums}, {"sig", "SHA256SUMS.minisig", f.Sig}, {"tarball", f.Name, f.Tarball}} {
		w, err := mw.CreateFormFile(p.field, p.file)
		if err != nil {
			return err
		}
		if _, err := w.Write(p.data); err != nil {
			return err
		}
	}
	if err := mw.Close(); err != nil {
		return err
	}
	asJSON, timeout := c.json, c.timeout
	c.json, c.timeout = false, 10*time.Minute
	defer func() { c.json, c.timeout = asJSON, timeout }()
	return c.call(http.MethodPost, path, rawBody{mw.FormDataContentType(), body.Bytes()}, out)
}

func listOr(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return fmt.Sprint(names)
}
