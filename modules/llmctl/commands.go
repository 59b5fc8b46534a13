package llmctl

import (
	"os"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// Commands are llmgw's operator commands, in the order "llmgw help" lists
// them; the llmgw package registers each with caddycmd.RegisterCommand.
func Commands() []caddycmd.Command {
	return []caddycmd.Command{
		{
			Name:  "ctl",
			Short: "Operates a running llmgw through its admin endpoint",
			Long: `
Reads and changes a running llmgw through the llm routes of its admin
endpoint. Tables by default; -o json or -o yaml (--json is -o json) for
scripts. Changes are logged with the OS user as the actor (under sudo,
the user who ran sudo). It exits 0 only when the command succeeded.

` + addressOrder + `

With --url (or LLMGW_ADMIN_URL) it talks to a site's llm_admin handler
instead, such as https://gw.example.com/llm, sending --token (or
LLMGW_ADMIN_TOKEN) as a bearer token; changes are then logged with the
token's id as the actor.`,
			CobraFunc: func(cmd *cobra.Command) {
				c := &ctl{out: os.Stdout, errOut: os.Stderr}
				c.register(cmd)
			},
		},
		mirrorCommand(), // mirror.go
	}
}

// register puts ctl's flags and subcommands on cmd.
func (c *ctl) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&c.admin, "admin", "", "the admin endpoint's address (default: $LLMGW_ADMIN_URL, $LLMGW_ADMIN, the --config file's, the running llmgw's autosaved config's, localhost:2019)")
	cmd.PersistentFlags().StringVar(&c.config, "config", "", "a config file whose admin address to use, as llmgw reload --config does")
	outputFlags(cmd, &c.output, &c.json)
	cmd.PersistentFlags().StringVar(&c.url, "url", "", "a site's llm_admin address, such as https://gw.example.com/llm (default $LLMGW_ADMIN_URL)")
	cmd.PersistentFlags().StringVar(&c.token, "token", "", "the llm_admin token to send (default $LLMGW_ADMIN_TOKEN)")
	cmd.AddCommand(c.models(), c.model(), c.replicas(), c.engines(), c.keys(), c.usage(), c.cache(), c.nodes(), c.peers(), c.providers(), c.mcp(), c.audit(), c.requests(), c.weights(),
		c.tenants(), c.kb(), c.cluster())
	withExamples(cmd)
}
