package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// In a cluster every node reaches the peer itself: both nodes list the
// peer's model, serve it whole and streamed with the key their tenant
// maps to, and fall back to it when the local model is stopped; the
// peer's model is in no node's plan or heartbeat (each node runs its
// own replica of it).
func TestClusterFederationPeer(t *testing.T) {
	ca, cert, key := privateCA(t, t.TempDir())
	tlsPort := freePort(t)
	peer := startPeerGateway(t, tlsPort, cert, key, fmt.Sprintf(`
		model chat {
			engine sim
			option max_tokens 10
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
	c := startCluster(t, 2, fmt.Sprintf(`
		model local-chat {
			engine sim
			option max_tokens 10
			fallback east/chat
		}
		peer east {
			url https://127.0.0.1:%d
			ca %s
			key peer-default-secret
			tenant acme/research key peer-research-secret
			models chat
			refresh 1s
		}`, tlsPort, ca)+tenancyBlock("", "", "", ""))

	for _, name := range c.names() {
		g := c.nodes[name]
		client := keyClient(g, "secret-1")
		waitFor(t, 30*time.Second, "east/chat served through "+name, func() bool {
			resp, apiErr := chatErr(client, "east/chat")
			return apiErr == nil && resp.Choices[0].Message.Content != ""
		})
		stream := client.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
			Model: "east/chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		})
		if acc, chunks := accumulateChat(t, stream); chunks < 3 || acc.Choices[0].Message.Content == "" {
			t.Errorf("through %s, streamed: %d chunks, answer %q", name, chunks, acc.Choices[0].Message.Content)
		}
		// Its replica of the peer's model is its own, on no node of the plan.
		for _, r := range g.models()["east/chat"].Replicas {
			if r.Node != "" && r.Node != name {
				t.Errorf("%s lists a replica of east/chat on node %s", name, r.Node)
			}
		}
	}
	for _, k := range peerKeys(peer) {
		if k != "pk-research" {
			t.Errorf("the peer saw key %s; acme/research maps to pk-research on every node", k)
		}
	}
	// The local model stopped: its fallback on the peer answers, on both
	// nodes.
	if code, body := c.nodes["n1"].adminPost("/llm/models/local-chat/stop", ""); code != 200 {
		t.Fatalf("stopping local-chat: %d %s", code, body)
	}
	for _, name := range c.names() {
		var code int
		var rep string
		waitFor(t, 30*time.Second, "local-chat falling back to the peer through "+name, func() bool {
			req, _ := http.NewRequest("POST", c.nodes[name].base+"/v1/chat/completions",
				strings.NewReader(`{"model":"local-chat","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer secret-1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			code, rep = resp.StatusCode, resp.Header.Get("X-Llm-Replica")
			return code == 200 && strings.HasPrefix(rep, "east/chat-")
		})
	}
}
