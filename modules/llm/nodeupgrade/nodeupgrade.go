// Package nodeupgrade installs a release on a cluster node: the release
// files "llmgw ctl cluster upgrade" sends (a tarball, its SHA256SUMS and
// their minisign signature, as one multipart/form-data body) are
// checked against the keys the node's config trusts (never keys a caller
// sends), the binary at the process's own path is replaced (the old one
// kept beside it as .previous), and the process restarts once its open
// requests end. A caller chooses neither the path nor the key: only a
// release signed by a trusted key, for this machine's platform, is ever
// run.
package nodeupgrade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/internal/buildinfo"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/llmproc"
	"github.com/llmgw/llmgw/release"
)

// maxSmall bounds SHA256SUMS and its signature.
const maxSmall = 1 << 20

// Read reads the release files of a POST …/upgrade body: the parts
// tarball (with its file name), sums and sig.
func Read(r *http.Request) (release.Files, error) {
	var f release.Files
	mr, err := r.MultipartReader()
	if err != nil {
		return f, apiErr(http.StatusBadRequest, "upgrade: the body must be multipart/form-data with the parts tarball, sums and sig (llmgw ctl cluster upgrade sends them): %v", err)
	}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return f, apiErr(http.StatusBadRequest, "upgrade: reading the body: %v", err)
		}
		if err := readPart(p, &f); err != nil {
			return f, err
		}
	}
	if f.Tarball == nil || f.Sums == nil || f.Sig == nil || f.Name == "" {
		return f, apiErr(http.StatusBadRequest, "upgrade: the body needs the parts tarball (with its file name), sums (SHA256SUMS) and sig (SHA256SUMS.minisig)")
	}
	return f, nil
}

func readPart(p *multipart.Part, f *release.Files) error {
	var dst *[]byte
	limit := int64(maxSmall)
	switch p.FormName() {
	case "tarball":
		dst, limit = &f.Tarball, release.MaxTarball
		f.Name = filepath.Base(p.FileName())
	case "sums":
		dst = &f.Sums
	case "sig":
		dst = &f.Sig
	default:
		return apiErr(http.StatusBadRequest, "upgrade: unknown part %q; the parts are tarball, sums and sig", p.FormName())
	}
	b, err := io.ReadAll(io.LimitReader(p, limit+1))
	if err != nil {
		return apiErr(http.StatusBadRequest, "upgrade: reading part %s: %v", p.FormName(), err)
	}
	if int64(len(b)) > limit {
		return apiErr(http.StatusRequestEntityTooLarge, "upgrade: part %s is larger than %d bytes: not an llmgw release file", p.FormName(), limit)
	}
	*dst = b
	return nil
}

// Install checks the release with keys and replaces the process's own
// binary with the release's; restart begins the restart, to be called
// once the answer is written. node names this node.
func Install(f release.Files, keys []release.PublicKey, node string, logger *zap.Logger) (out llmapi.NodeUpgrade, restart func(), err error) {
	out = llmapi.NodeUpgrade{Node: node, From: buildinfo.Get().Version, To: release.VersionOf(f.Name)}
	f.From = "the release sent to node " + node
	bin, err := release.Open(f, keys)
	if err != nil {
		return out, nil, apiErr(http.StatusBadRequest, "upgrade: node %s: %v", node, err)
	}
	how, restart, err := llmproc.RestartSoon(logger)
	if err != nil {
		return out, nil, fmt.Errorf("upgrade: node %s: %w; nothing was changed", node, err)
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return out, nil, apiErr(http.StatusInternalServerError, "upgrade: node %s: finding its own binary: %v", node, err)
	}
	if err := release.Replace(exe, bin); err != nil {
		return out, nil, apiErr(http.StatusInternalServerError, "upgrade: node %s: %v", node, err)
	}
	out.Binary, out.Restart = exe, how
	logger.Info("release installed; restarting once open requests end", zap.String("from", out.From), zap.String("to", out.To), zap.String("binary", exe))
	return out, restart, nil
}

func apiErr(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

// Cluster is what a node upgrade needs of the cluster membership
// (cluster.Member).
type Cluster interface {
	NodeName() string
	PeerAddr(name string) (string, bool)
	PeerSend(ctx context.Context, addr, path, contentType string, body io.Reader) ([]byte, error)
	TrustedKeys() []release.PublicKey
}

// Serve answers POST /llm/nodes/<name>/upgrade: this node installs the
// release in r's body, or hands the body to node name through the
// node-to-node endpoint (at peerPath), where that node installs it.
// restart, when not nil, begins this node's restart once the answer is
// written.
func Serve(w http.ResponseWriter, r *http.Request, c Cluster, name, peerPath string, logger *zap.Logger) (out llmapi.NodeUpgrade, restart func(), err error) {
	r.Body = http.MaxBytesReader(w, r.Body, release.MaxTarball+4<<20)
	if name == c.NodeName() {
		return installHere(r, c, logger)
	}
	out, err = forward(r, c, name, peerPath)
	return out, nil, err
}

// forward hands r's body to node name, which installs the release.
func forward(r *http.Request, c Cluster, name, peerPath string) (llmapi.NodeUpgrade, error) {
	var out llmapi.NodeUpgrade
	addr, ok := c.PeerAddr(name)
	if !ok {
		return out, apiErr(http.StatusNotFound, "no live node %q in the cluster; GET /llm/nodes lists them", name)
	}
	raw, err := c.PeerSend(r.Context(), addr, peerPath, r.Header.Get("Content-Type"), r.Body)
	var e struct{ Error string }
	if err != nil && json.Unmarshal(raw, &e) == nil && e.Error != "" {
		return out, apiErr(http.StatusBadGateway, "%s", e.Error)
	}
	if err != nil {
		return out, apiErr(http.StatusBadGateway, "upgrade: node %s: %v", name, err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, apiErr(http.StatusBadGateway, "upgrade: node %s answered %q: %v", name, raw, err)
	}
	return out, nil
}

func installHere(r *http.Request, c Cluster, logger *zap.Logger) (llmapi.NodeUpgrade, func(), error) {
	f, err := Read(r)
	if err != nil {
		return llmapi.NodeUpgrade{}, nil, err
	}
	return Install(f, c.TrustedKeys(), c.NodeName(), logger)
}

// ServePeer answers another node's POST at peerPath: this node installs
// the release.
func ServePeer(w http.ResponseWriter, r *http.Request, c Cluster, logger *zap.Logger) {
	out, restart, err := installHere(r, c, logger)
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		status := http.StatusInternalServerError
		var ae caddy.APIError
		if errors.As(err, &ae) {
			status, err = ae.HTTPStatus, ae.Err
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
	Answered(w, restart)
}

// Answered flushes the answer written to w, then begins the restart.
func Answered(w http.ResponseWriter, restart func()) {
	if restart == nil {
		return
	}
	_ = http.NewResponseController(w).Flush()
	restart()
}
