package llmctl

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// kb is "llmgw ctl kb": the knowledge bases of every tenant, through
// llm_kb's routes under /llm/kb/.
func (c *ctl) kb() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{Use: "kb", Short: "Lists, fills, searches and deletes the knowledge bases (llm_kb's vector stores) of every tenant"}
	list := &cobra.Command{Use: "list [--tenant T]", Short: "Lists the knowledge bases: tenant, shared or not, files by state, bytes, last change", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			path := "/llm/kb/stores"
			if tenant != "" {
				path += "?tenant=" + url.QueryEscape(tenant)
			}
			var stores []llmapi.KBStore
			if err := c.call("GET", path, nil, &stores); err != nil || c.json {
				return err
			}
			rows := make([][]string, 0, len(stores))
			for _, s := range stores {
				rows = append(rows, kbStoreRow(s))
			}
			c.table("ID\tNAME\tTENANT\tSHARED\tFILES\tBYTES\tUPDATED", rows)
			return nil
		}}
	list.Flags().StringVar(&tenant, "tenant", "", "only the stores of this org, org/team or org/team/project and below")
	cmd.AddCommand(list, c.kbCreate(), c.kbAdd(), c.kbSearch(), c.kbReindex(), c.kbDelete())
	return cmd
}

// kbStoreRow is a store's line of the list.
func kbStoreRow(s llmapi.KBStore) []string {
	shared := "no"
	if s.Shared {
		shared = "yes"
	}
	return []string{s.ID, dash(s.Name), s.Tenant, shared, kbCounts(s.FileCounts), humanize.IBytes(uint64(s.Bytes)), s.UpdatedAt.UTC().Format(time.DateTime)}
}

// kbCounts are a store's files by state: "3 (2 completed, 1 failed)".
func kbCounts(fc llmapi.KBFileCounts) string {
	var parts []string
	for _, p := range []struct {
		n    int
		name string
	}{{fc.Completed, "completed"}, {fc.InProgress, "in progress"}, {fc.Failed, "failed"}, {fc.Cancelled, "cancelled"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.name))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", fc.Total, strings.Join(parts, ", "))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// kbCreate is ctl kb create.
func (c *ctl) kbCreate() *cobra.Command {
	var tenant string
	var share bool
	cmd := &cobra.Command{Use: "create --tenant T [--share] NAME", Short: "Creates a knowledge base for a project, or with --share for a team or organisation whose projects all read it", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var s llmapi.KBStore
			if err := c.call("POST", "/llm/kb/stores", llmapi.KBCreateStore{Tenant: tenant, Share: share, Name: args[0]}, &s); err != nil || c.json {
				return err
			}
			how := ""
			if s.Shared {
				how = ", shared with every project below it"
			}
			fmt.Fprintf(c.out, "knowledge base %s (%s) created for %s%s; add files with llmgw ctl kb add %s PATH...\n", s.ID, s.Name, s.Tenant, how, s.ID)
			return nil
		}}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the owner: org/team/project, or with --share a team or organisation (required)")
	cmd.Flags().BoolVar(&share, "share", false, "let every project below the tenant read it (for a team or organisation)")
	_ = cmd.MarkFlagRequired("tenant")
	return cmd
}

// kbStoreID finds a store by id or by name.
func (c *ctl) kbStoreID(arg string) (string, error) {
	if strings.HasPrefix(arg, "vs_") {
		return arg, nil
	}
	var stores []llmapi.KBStore
	if err := c.read("/llm/kb/stores", &stores); err != nil {
		return "", err
	}
	var ids []string
	for _, s := range stores {
		if s.Name == arg {
			ids = append(ids, s.ID)
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("no knowledge base has the id or name %q; llmgw ctl kb list lists them", arg)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%d knowledge bases are named %q (%s): give the id", len(ids), arg, strings.Join(ids, ", "))
}

// kbSearch is ctl kb search.
func (c *ctl) kbSearch() *cobra.Command {
	var n int
	cmd := &cobra.Command{Use: "search STORE QUERY", Short: "Searches a knowledge base (by id or name) and prints the passages with their files and scores", Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			id, err := c.kbStoreID(args[0])
			if err != nil {
				return err
			}
			var res llmapi.KBSearchResults
			if err := c.call("POST", "/llm/kb/stores/"+url.PathEscape(id)+"/search", llmapi.KBSearch{Query: args[1], MaxNumResults: n}, &res); err != nil || c.json {
				return err
			}
			if len(res.Passages) == 0 {
				fmt.Fprintf(c.out, "nothing found for %q\n", res.Query)
			}
			for i, p := range res.Passages {
				fmt.Fprintf(c.out, "%d. %s  (score %.3f)\n   %s\n", i+1, p.Filename, p.Score, oneLine(p.Text, 300))
			}
			return nil
		}}
	cmd.Flags().IntVar(&n, "max", 0, "at most this many passages, 1 to 50 (default the handler's max_results)")
	return cmd
}

// oneLine folds a passage onto one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// kbReindex is ctl kb reindex.
func (c *ctl) kbReindex() *cobra.Command {
	return &cobra.Command{Use: "reindex STORE", Short: "Reads, chunks and embeds every file of a knowledge base again", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			id, err := c.kbStoreID(args[0])
			if err != nil {
				return err
			}
			var out llmapi.KBReindexed
			if err := c.call("POST", "/llm/kb/stores/"+url.PathEscape(id)+"/reindex", nil, &out); err != nil || c.json {
				return err
			}
			fmt.Fprintf(c.out, "%d files of %s are being reindexed; llmgw ctl kb list shows their progress\n", out.Files, out.ID)
			return nil
		}}
}

// kbDelete is ctl kb delete.
func (c *ctl) kbDelete() *cobra.Command {
	return &cobra.Command{Use: "delete STORE", Short: "Deletes a knowledge base: its chunks and vectors go", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			id, err := c.kbStoreID(args[0])
			if err != nil {
				return err
			}
			if err := c.call("DELETE", "/llm/kb/stores/"+url.PathEscape(id), nil, nil); err != nil || c.json {
				return err
			}
			fmt.Fprintf(c.out, "knowledge base %s deleted\n", id)
			return nil
		}}
}
