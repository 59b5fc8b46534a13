package llmctl

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// mcp is "llmgw ctl mcp": the MCP gateway's upstream servers.
func (c *ctl) mcp() *cobra.Command {
	cmd := &cobra.Command{Use: "mcp", Short: "Lists, adds, removes, enables and disables the MCP servers behind llm_mcp"}
	cmd.AddCommand(c.mcpServers(), c.mcpTools(), c.mcpAdd())
	cmd.AddCommand(c.mcpToggles()...)
	cmd.AddCommand(c.mcpAuthorize(), c.mcpAuthorization(), c.mcpDeauthorize())
	return cmd
}

// mcpServers is ctl mcp servers: each server's state and origin.
func (c *ctl) mcpServers() *cobra.Command {
	return &cobra.Command{Use: "servers", Short: "Lists the MCP servers: transport, health, restarts, tools", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var list []mcpServerStatus
			if err := c.call("GET", "/llm/mcp/servers", nil, &list); err != nil || c.json {
				return err
			}
			var rows [][]string
			for _, s := range list {
				state := "up"
				switch {
				case !s.Enabled:
					state = "disabled"
				case !s.Up:
					state = "down"
				}
				origin := "config"
				if s.Runtime {
					origin = "runtime"
				}
				rows = append(rows, []string{s.Name, s.Transport, s.Target, state, fmt.Sprint(s.Restarts), fmt.Sprint(len(s.Tools)), origin, s.LastError})
			}
			c.table("SERVER\tTRANSPORT\tTARGET\tSTATE\tRESTARTS\tTOOLS\tFROM\tLAST ERROR", rows)
			return nil
		}}
}

// mcpTools is ctl mcp tools: one tool a line, for scripts.
func (c *ctl) mcpTools() *cobra.Command {
	return &cobra.Command{Use: "tools [<server>]", Short: "Lists the namespaced tools (server.tool), of one server or all", Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var list []mcpServerStatus
			if err := c.call("GET", "/llm/mcp/servers", nil, &list); err != nil || c.json {
				return err
			}
			for _, s := range list {
				if len(args) == 1 && s.Name != args[0] {
					continue
				}
				for _, t := range s.Tools {
					fmt.Fprintln(c.out, t)
				}
			}
			return nil
		}}
}

// mcpAdd is ctl mcp add: the file is decoded as a server of llm_mcp's
// config and sent again, so what it does not know is dropped.
func (c *ctl) mcpAdd() *cobra.Command {
	var file string
	add := &cobra.Command{Use: "add -f <server.json>", Short: "Adds a server at runtime, in the shape a server takes in llm_mcp's JSON config", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			raw, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("reading the server: %w", err)
			}
			var s mcpServerConfig
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("decoding %s: %w", file, err)
			}
			if err := c.call("POST", "/llm/mcp/servers", s, nil); err != nil || c.json {
				return err
			}
			fmt.Fprintf(c.out, "mcp server %s added\n", s.Name)
			return nil
		}}
	add.Flags().StringVarP(&file, "file", "f", "", "the server as JSON")
	_ = add.MarkFlagRequired("file")
	return add
}

// mcpToggles are ctl mcp remove, enable and disable.
func (c *ctl) mcpToggles() []*cobra.Command {
	var cmds []*cobra.Command
	for _, a := range []struct{ use, method, suffix, short, done string }{
		{"remove", "DELETE", "", "Removes a server added at runtime", "removed"},
		{"enable", "POST", "/enable", "Lists and calls a disabled server's tools again", "enabled"},
		{"disable", "POST", "/disable", "Stops listing and calling a server's tools (its connection stays)", "disabled"},
	} {
		cmds = append(cmds, &cobra.Command{Use: a.use + " <server>", Short: a.short, Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error {
				if err := c.call(a.method, "/llm/mcp/servers/"+url.PathEscape(args[0])+a.suffix, nil, nil); err != nil || c.json {
					return err
				}
				fmt.Fprintf(c.out, "mcp server %s %s\n", strings.TrimSpace(args[0]), a.done)
				return nil
			}})
	}
	return cmds
}

// mcpTenant reads --tenant <level>:<id>; none is the server's shared
// tokens.
func mcpTenant(tenant string) (mcpAuthorizeRequest, error) {
	if tenant == "" {
		return mcpAuthorizeRequest{}, nil
	}
	level, name, ok := strings.Cut(tenant, ":")
	if !ok || name == "" {
		return mcpAuthorizeRequest{}, fmt.Errorf("--tenant %q: use <level>:<id>, such as key:k1, team:acme/research or org:acme", tenant)
	}
	return mcpAuthorizeRequest{Level: level, Name: name}, nil
}

// mcpAuthorize starts OAuth: the URL to open goes to stdout, alone, and
// what to do with it to stderr.
func (c *ctl) mcpAuthorize() *cobra.Command {
	var tenant string
	authorize := &cobra.Command{Use: "authorize <server> [--tenant key:<id>|project:<path>|team:<path>|org:<name>]",
		Short: "Starts OAuth towards an MCP server: prints the URL to open in a browser (client_credentials servers: gets a token)", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			body, err := mcpTenant(tenant)
			if err != nil {
				return err
			}
			var out mcpAuthorizeResponse
			if err := c.call("POST", "/llm/mcp/servers/"+url.PathEscape(args[0])+"/authorize", body, &out); err != nil {
				return err
			}
			if c.json {
				return nil
			}
			if out.Authorized {
				fmt.Fprintf(c.out, "mcp server %s: authorised (%s)\n", out.Server, out.Tenant)
				return nil
			}
			fmt.Fprintf(c.errOut, "Open this URL in a browser to authorise mcp server %s for %s (good until %s; it comes back to %s):\n",
				out.Server, out.Tenant, out.ExpiresAt.Local().Format("15:04:05"), out.RedirectURL)
			fmt.Fprintln(c.out, out.AuthorizationURL)
			return nil
		}}
	authorize.Flags().StringVar(&tenant, "tenant", "", "whose token: key:<id>, project:<path>, team:<path> or org:<name> (servers with tokens per_tenant)")
	return authorize
}

// mcpAuthorization lists whose tokens llmgw holds, never the tokens.
func (c *ctl) mcpAuthorization() *cobra.Command {
	return &cobra.Command{Use: "authorization <server>", Short: "Lists whose OAuth tokens llmgw holds for an MCP server, and their state (never the tokens)", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var st mcpAuthStatus
			if err := c.call("GET", "/llm/mcp/servers/"+url.PathEscape(args[0])+"/authorization", nil, &st); err != nil {
				return err
			}
			if c.json {
				return nil
			}
			fmt.Fprintf(c.out, "mcp server %s: grant %s, tokens %s, client %s at %s\n", st.Server, st.Grant, st.Tokens, st.ClientID, st.Issuer)
			var rows [][]string
			for _, t := range st.Tenants {
				who := t.Level
				if t.Name != "" {
					who += ":" + t.Name
				}
				exp := "-"
				if !t.ExpiresAt.IsZero() {
					exp = t.ExpiresAt.Local().Format("2006-01-02 15:04:05")
				}
				rows = append(rows, []string{who, t.State, exp, fmt.Sprint(t.HasRefreshToken), fmt.Sprint(t.Refreshes), t.LastError})
			}
			c.table("TENANT\tSTATE\tEXPIRES\tREFRESH TOKEN\tREFRESHES\tLAST ERROR", rows)
			return nil
		}}
}

// mcpDeauthorize revokes and forgets a tenant's tokens.
func (c *ctl) mcpDeauthorize() *cobra.Command {
	var forget string
	deauth := &cobra.Command{Use: "deauthorize <server> [--tenant key:<id>|…]", Short: "Revokes and forgets a tenant's (or the shared) OAuth tokens for an MCP server", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			body, err := mcpTenant(forget)
			if err != nil {
				return err
			}
			q := url.Values{}
			if body.Level != "" {
				q.Set("level", body.Level)
				q.Set("name", body.Name)
			}
			if err := c.call("DELETE", "/llm/mcp/servers/"+url.PathEscape(args[0])+"/authorization?"+q.Encode(), nil, nil); err != nil || c.json {
				return err
			}
			fmt.Fprintf(c.out, "mcp server %s: tokens of %s forgotten\n", args[0], cmpStr(forget, "shared"))
			return nil
		}}
	deauth.Flags().StringVar(&forget, "tenant", "", "whose tokens: key:<id>, project:<path>, team:<path> or org:<name>")
	return deauth
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
