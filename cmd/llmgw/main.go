// Command llmgw is Caddy with the llm modules compiled in: an
// OpenAI-compatible gateway in front of models it starts itself through
// engine plugins.
package main

import (
	"os"

	"github.com/caddyserver/caddy/v2"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/llmgw/llmgw"
)

func main() {
	// Engine plugins are children that speak go-plugin on stdout; run them
	// before Caddy's command machinery so nothing else touches stdout.
	if len(os.Args) > 1 && os.Args[1] == "engine" {
		os.Exit(llmgw.RunEngine(os.Args[2:]))
	}
	if len(os.Args) == 0 {
		os.Exit(caddy.ExitCodeFailedStartup)
	}
	execute() // root.go: caddycmd.Main's command tree, with help texts that say llmgw
}
