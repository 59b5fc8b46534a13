package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// privateCA writes, in dir, a CA of its own (ca.pem) and a certificate
// for 127.0.0.1 it signed (cert.pem, key.pem); it returns their paths.
func privateCA(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test private CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for path, block := range map[string]*pem.Block{ca: {Type: "CERTIFICATE", Bytes: caDER},
		cert: {Type: "CERTIFICATE", Bytes: srvDER}, key: {Type: "PRIVATE KEY", Bytes: pkcs8}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca, cert, key
}

// startPeerGateway runs an llmgw that serves its models over HTTPS with a
// certificate of a private CA (on tlsPort), wanting one of its keys, and
// over plain HTTP without keys for the harness's readiness check only.
func startPeerGateway(t *testing.T, tlsPort int, cert, key, llmBlock string) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}}
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	auto_https disable_redirects
	llm {
%s
	}
}

:%d {
	route /v1/* {
		llm_router
	}
}

https://127.0.0.1:%d {
	tls %s %s
	log
	route /v1/* {
		llm_quota
		llm_router
	}
}
`, g.admin, filepath.Join(g.dir, "storage"), llmBlock, g.http, tlsPort, cert, key)
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	return g
}

// peerStatus is the local gateway's view of its peer east.
func peerStatus(g *gateway) (llmapi.PeerStatus, string) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/llm/peers", g.admin))
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		g.t.Fatal(err)
	}
	var list []llmapi.PeerStatus
	if err := json.Unmarshal(raw, &list); err != nil || len(list) != 1 {
		g.t.Fatalf("GET /llm/peers: got %s (%v), want one peer", raw, err)
	}
	return list[0], string(raw)
}

// peerKeys are the key ids the peer's request log holds, one per request
// of its model chat, oldest first.
func peerKeys(g *gateway) []string {
	var page llmapi.RequestPage
	g.adminGet("/llm/requests?limit=1000", &page)
	var ids []string
	for i := len(page.Data) - 1; i >= 0; i-- {
		if r := page.Data[i]; r.Model == "chat" {
			ids = append(ids, r.KeyID)
		}
	}
	return ids
}

// TestFederationPeer: an llmgw with a peer block lists the peer's models
// (a real llmgw serving over HTTPS with a private CA) under its prefix,
// serves them whole, streamed and with tool calls, sends each tenant's
// requests with the key the table maps it to, falls back to them when
// the local model is stopped, and, when the peer stops, answers 503
// naming it or serves a local fallback. A peer whose certificate the
// given CA did not sign is shown down with that reason.
func TestFederationPeer(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := privateCA(t, dir)
	otherCA, _, _ := privateCA(t, t.TempDir())
	tlsPort := freePort(t)
	peer := startPeerGateway(t, tlsPort, cert, key, fmt.Sprintf(`
		model chat {
			engine sim
			option max_tokens 10
		}
		model hidden {
			engine sim
			min 0
		}
		org peerorg {
			team gw {
				project shared {
					key pk-default %s
				}
				project research {
					key pk-research %s
				}
			}
		}`, tenancy.HashKey("peer-default-secret"), tenancy.HashKey("peer-research-secret")))

	peerBlock := func(caFile string) string {
		return fmt.Sprintf(`
		peer east {
			url https://127.0.0.1:%d
			ca %s
			key peer-default-secret
			tenant acme/research key peer-research-secret
			models chat*
			fallback local-other
			refresh 1s
		}`, tlsPort, caFile)
	}
	// The local gateway has llm_admin on its site, to ask GET /llm/peers
	// as a viewer and as a tenant admin.
	local := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, quota: new(string),
		routes: fmt.Sprintf(`route /llm/* {
		llm_admin {
			token watcher %s viewer
			token alpha-lead %s tenant_admin project acme/research/alpha
		}
	}`, tenancy.HashKey("watcher-token"), tenancy.HashKey("lead-token"))}
	local.writeConfig(`
		model local-chat {
			engine sim
			option max_tokens 10
			fallback east/chat
		}
		model local-other {
			engine sim
			option max_tokens 10
		}`+tenancyBlock("", "", "", "")+`
		org acme2 {
			team sales {
				project beta {
					key k3 `+tenancy.HashKey("secret-3")+`
				}
			}
		}`+peerBlock(ca), "")
	local.start()
	research, sales := keyClient(local, "secret-1"), keyClient(local, "secret-3")

	waitFor(t, 30*time.Second, "the peer's model listed under its prefix", func() bool {
		list, err := research.Models.List(bg)
		if err != nil {
			return false
		}
		ids := map[string]bool{}
		for _, m := range list.Data {
			ids[m.ID] = true
		}
		if ids["east/hidden"] {
			t.Fatal("east/hidden is listed; the models glob leaves it out")
		}
		return ids["east/chat"]
	})
	// east/chat is listed from the start (local-chat's fallback names
	// it); the peer's first check may come after.
	waitFor(t, 30*time.Second, "the peer's first check", func() bool { st, _ := peerStatus(local); return st.State != "unknown" })
	st, raw := peerStatus(local)
	if st.State != "up" || len(st.Models) != 1 || st.Models[0] != "east/chat" || st.CA != ca || st.Checked.IsZero() {
		t.Errorf("GET /llm/peers: got %+v", st)
	}
	if strings.Contains(raw, "secret") || strings.Contains(local.logs.String(), "peer-research-secret") {
		t.Errorf("a peer key is shown back: %s", raw)
	}
	if code, _, body := siteCall(t, local, "watcher-token", "GET", "/llm/peers", ""); code != 200 || strings.Contains(body, "secret") {
		t.Errorf("GET /llm/peers as a viewer: got %d %s, want 200 without a key", code, body)
	}
	if code, _, body := siteCall(t, local, "lead-token", "GET", "/llm/peers", ""); code != 403 {
		t.Errorf("GET /llm/peers as a tenant admin: got %d %s, want 403", code, body)
	}
	checkAgainstSchema(t, local, "/llm/peers", raw)

	t.Run("served with the key of each tenant", func(t *testing.T) {
		resp, apiErr := chatErr(research, "east/chat")
		if apiErr != nil || resp.Choices[0].Message.Content == "" {
			t.Fatalf("east/chat: got %+v, %v", resp, apiErr)
		}
		if resp, apiErr := chatErr(sales, "east/chat"); apiErr != nil || resp.Usage.CompletionTokens == 0 {
			t.Fatalf("east/chat for sales: got %+v, %v", resp, apiErr)
		}
		var got []string
		waitFor(t, 10*time.Second, "the peer's request log", func() bool { got = peerKeys(peer); return len(got) >= 2 })
		if len(got) != 2 || got[0] != "pk-research" || got[1] != "pk-default" {
			t.Errorf("keys the peer saw: got %v, want [pk-research pk-default] (acme/research's key, then the default)", got)
		}
		// Usage is charged here to the local tenant, at the peer to its key.
		var here, there struct {
			Models map[string]llmapi.Usage `json:"models"`
		}
		waitFor(t, 10*time.Second, "usage recorded on both sides", func() bool {
			local.adminGet("/llm/usage?project=acme/research/alpha", &here)
			peer.adminGet("/llm/usage?key=pk-research", &there)
			return here.Models["east/chat"].Requests == 1 && there.Models["chat"].Requests == 1
		})
		if h, p := here.Models["east/chat"], there.Models["chat"]; h.OutputTokens == 0 || h.OutputTokens != p.OutputTokens {
			t.Errorf("usage of acme/research/alpha here %+v, of pk-research at the peer %+v: want the same tokens", h, p)
		}
	})

	t.Run("streamed", func(t *testing.T) {
		stream := research.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
			Model: "east/chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		acc, chunks := accumulateChat(t, stream)
		if chunks < 3 || acc.Choices[0].Message.Content == "" || acc.Usage.CompletionTokens == 0 {
			t.Errorf("stream: %d chunks, answer %q, usage %+v", chunks, acc.Choices[0].Message.Content, acc.Usage)
		}
	})

	t.Run("tool call", func(t *testing.T) {
		resp, err := research.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
			Model:    "east/chat",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris?")},
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object",
					"properties": map[string]any{"city": map[string]any{"type": "string"}}}})},
			ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
		})
		if err != nil {
			t.Fatal(err)
		}
		if calls := resp.Choices[0].Message.ToolCalls; len(calls) != 1 || calls[0].Function.Name != "get_weather" {
			t.Errorf("tool calls: got %+v", calls)
		}
	})

	t.Run("the peer's list kept fresh", func(t *testing.T) {
		listed := func(id string) bool {
			list, err := research.Models.List(bg)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range list.Data {
				if m.ID == id {
					return true
				}
			}
			return false
		}
		if resp, body := post(t, fmt.Sprintf("http://127.0.0.1:%d/llm/models", peer.admin), `{"name":"chat-new","engine":"sim","options":{"max_tokens":"5"}}`); resp.StatusCode != 201 {
			t.Fatalf("adding chat-new at the peer: %d %s", resp.StatusCode, body)
		}
		waitFor(t, 15*time.Second, "east/chat-new listed", func() bool { return listed("east/chat-new") })
		if resp, apiErr := chatErr(research, "east/chat-new"); apiErr != nil || resp.Choices[0].Message.Content == "" {
			t.Fatalf("east/chat-new: got %+v, %v", resp, apiErr)
		}
		req, _ := http.NewRequest("DELETE", fmt.Sprintf("http://127.0.0.1:%d/llm/models/chat-new", peer.admin), nil)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
			t.Fatalf("removing chat-new at the peer: %v %v", resp, err)
		}
		waitFor(t, 15*time.Second, "east/chat-new gone", func() bool { return !listed("east/chat-new") })
	})

	t.Run("a fallback of a stopped local model", func(t *testing.T) {
		if resp, body := post(t, fmt.Sprintf("http://127.0.0.1:%d/llm/models/local-chat/stop", local.admin), ""); resp.StatusCode != 200 {
			t.Fatalf("stop: %d %s", resp.StatusCode, body)
		}
		req, _ := http.NewRequest("POST", local.base+"/v1/chat/completions",
			strings.NewReader(`{"model":"local-chat","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer secret-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if rep := resp.Header.Get("X-Llm-Replica"); resp.StatusCode != 200 || !strings.HasPrefix(rep, "east/chat-") {
			t.Fatalf("local-chat, stopped, with the peer as fallback: got %d from replica %q, want 200 from east/chat", resp.StatusCode, rep)
		}
	})

	t.Run("the peer down", func(t *testing.T) {
		peer.stop()
		_, apiErr := chatErr(research, "local-chat") // stopped here, its fallback the peer
		if apiErr == nil || apiErr.StatusCode != 503 || !strings.Contains(apiErr.Message, `peer "east"`) {
			t.Fatalf("local-chat with the peer down: got %v, want 503 naming the peer", apiErr)
		}
		t.Logf("503: %s", apiErr.Message)
		waitFor(t, 10*time.Second, "the peer shown down", func() bool {
			st, _ := peerStatus(local)
			return st.State == "down" && st.Reason != ""
		})
		resp, apiErr := chatErr(research, "east/chat") // the peer block's fallback serves
		if apiErr != nil || resp.Choices[0].Message.Content == "" {
			t.Fatalf("east/chat with the peer down: got %+v, %v; want local-other to serve", resp, apiErr)
		}
		waitFor(t, 10*time.Second, "east/chat listed failing, naming the peer", func() bool {
			var models struct {
				Data []struct {
					ID    string `json:"id"`
					LLMGW struct {
						State, Reason string
					} `json:"llmgw"`
				} `json:"data"`
			}
			list, err := research.Models.List(bg)
			if err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal([]byte(list.RawJSON()), &models)
			for _, m := range models.Data {
				if m.ID == "east/chat" {
					return m.LLMGW.State == "failing" && strings.Contains(m.LLMGW.Reason, `peer "east"`)
				}
			}
			return false
		})
	})

	t.Run("a CA that did not sign the peer's certificate", func(t *testing.T) {
		peer.start()
		wrong := startGateway(t, peerBlock(otherCA)+`
		model local-other {
			engine sim
		}`, "")
		var st llmapi.PeerStatus
		waitFor(t, 20*time.Second, "the peer shown down", func() bool {
			st, _ = peerStatus(wrong)
			return st.State == "down"
		})
		if !strings.Contains(st.Reason, "not signed by the CA in "+otherCA) {
			t.Errorf("reason: got %q, want it to say the CA did not sign the peer's certificate", st.Reason)
		}
		// A reload with the right CA: the peer is up and serves.
		wrong.reload(peerBlock(ca)+`
		model local-other {
			engine sim
		}`, "")
		waitFor(t, 20*time.Second, "the peer up after the reload", func() bool {
			st, _ = peerStatus(wrong)
			return st.State == "up"
		})
		waitFor(t, 20*time.Second, "east/chat served after the reload", func() bool {
			resp, _ := post(t, wrong.base+"/v1/chat/completions", `{"model":"east/chat","messages":[{"role":"user","content":"hi"}]}`)
			return resp.StatusCode == 200
		})
	})
}

// checkAgainstSchema validates body, the answer of GET path, against the
// response schema the admin API's OpenAPI document gives it.
func checkAgainstSchema(t *testing.T, g *gateway, path, body string) {
	t.Helper()
	_, doc := adminCall(t, g, "GET", "/llm/openapi.json")
	spec, err := openapi3.NewLoader().LoadFromData([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	mt := spec.Paths.Find(path).GetOperation("GET").Responses.Value("200").Value.Content.Get("application/json")
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if err := mt.Schema.Value.VisitJSON(v); err != nil {
		t.Errorf("GET %s: the answer does not match its schema: %v\n%.300s", path, err, body)
	}
}
