package llmgw

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llmmcp"
)

// mcp is "llmgw ctl mcp": the MCP gateway's upstream servers.
func (c *ctl) mcp() *cobra.Command {
	cmd := &cobra.Command{Use: "mcp", Short: "Lists, adds, removes, enables and disables the MCP servers behind llm_mcp"}
	cmd.AddCommand(&cobra.Command{Use: "servers", Short: "Lists the MCP servers: transport, health, restarts, tools", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var list []llmmcp.ServerStatus
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
			table("SERVER\tTRANSPORT\tTARGET\tSTATE\tRESTARTS\tTOOLS\tFROM\tLAST ERROR", rows)
			return nil
		}})
	cmd.AddCommand(&cobra.Command{Use: "tools [<server>]", Short: "Lists the namespaced tools (server.tool), of one server or all", Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var list []llmmcp.ServerStatus
			if err := c.call("GET", "/llm/mcp/servers", nil, &list); err != nil || c.json {
				return err
			}
			for _, s := range list {
				if len(args) == 1 && s.Name != args[0] {
					continue
				}
				for _, t := range s.Tools {
					fmt.Println(t)
				}
			}
			return nil
		}})
	var file string
	add := &cobra.Command{Use: "add -f <server.json>", Short: "Adds a server at runtime, in the shape a server takes in llm_mcp's JSON config", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			raw, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("reading the server: %w", err)
			}
			var s llmmcp.ServerConfig
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("decoding %s: %w", file, err)
			}
			if err := c.call("POST", "/llm/mcp/servers", s, nil); err != nil || c.json {
				return err
			}
			fmt.Printf("mcp server %s added\n", s.Name)
			return nil
		}}
	add.Flags().StringVarP(&file, "file", "f", "", "the server as JSON")
	_ = add.MarkFlagRequired("file")
	cmd.AddCommand(add)
	for _, a := range []struct{ use, method, suffix, short, done string }{
		{"remove", "DELETE", "", "Removes a server added at runtime", "removed"},
		{"enable", "POST", "/enable", "Lists and calls a disabled server's tools again", "enabled"},
		{"disable", "POST", "/disable", "Stops listing and calling a server's tools (its connection stays)", "disabled"},
	} {
		cmd.AddCommand(&cobra.Command{Use: a.use + " <server>", Short: a.short, Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error {
				if err := c.call(a.method, "/llm/mcp/servers/"+url.PathEscape(args[0])+a.suffix, nil, nil); err != nil || c.json {
					return err
				}
				fmt.Printf("mcp server %s %s\n", strings.TrimSpace(args[0]), a.done)
				return nil
			}})
	}
	return cmd
}
