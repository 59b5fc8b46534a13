// Command thirdparty is a third-party engine plugin used by the tests: the
// simulator under another engine type ("thirdparty"), built as its own
// executable the way an outside project would ship one.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/engines/sim"
	"github.com/llmgw/llmgw/plugins/engine"
)

type thirdParty struct{ *sim.Engine }

func (e thirdParty) Info(ctx context.Context) (engine.Info, error) {
	i, err := e.Engine.Info(ctx)
	i.Type, i.Version = "thirdparty", "9.9.9"
	return i, err
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "replica" {
		if err := sim.RunReplica(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	exe, _ := os.Executable()
	e := sim.New(hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true}))
	e.Command = []string{exe, "replica"}
	engine.Serve(thirdParty{e}, os.Args[1:])
}
