package llmctl

import (
	"testing"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

func TestPeers(t *testing.T) {
	a := newAdmin(t, map[string]answer{
		"GET /llm/peers": {body: []llmapi.PeerStatus{
			{Name: "east", URL: "https://gw.east", State: "up", Models: []string{"east/chat", "east/embed"}},
			{Name: "west", URL: "https://gw.west", State: "down", Reason: "its certificate is not signed by the CA in /ca.pem"},
		}},
	})
	out, _, err := run(t, a, "peers")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ctl peers", out, lines(
		"PEER  URL              STATE  CHECKED  MODELS                REASON",
		"east  https://gw.east  up     never    east/chat,east/embed  -",
		"west  https://gw.west  down   never    -                     its certificate is not signed by the CA in /ca.pem"))
	checkSent(t, a, "GET /llm/peers")
}
