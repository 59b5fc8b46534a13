package llmctl

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// modelLicence is "llmgw ctl model licence": a model's licence and for
// whom it was accepted; "accept" accepts it for a tenant or everyone.
func (c *ctl) modelLicence() *cobra.Command {
	cmd := &cobra.Command{Use: "licence <model>", Aliases: []string{"license"}, Short: "Shows a model's licence and for whom it was accepted", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var all []llmapi.LicenceStatus
			if err := c.call("GET", "/llm/licences", nil, &all); err != nil {
				return err
			}
			for _, st := range all {
				if st.Model == args[0] {
					if c.json {
						return c.print(st)
					}
					c.printLicence(st)
					return nil
				}
			}
			return fmt.Errorf("model %s is served under no licence (or is not in the catalog): llmgw ctl models lists the models", args[0])
		}}
	var tenant string
	var everyone bool
	accept := &cobra.Command{Use: "accept <model> (--tenant <org[/team[/project]]> | --everyone)", Short: "Accepts a model's licence for a tenant, or for everyone (recorded in the audit log)", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if (tenant == "") == !everyone {
				return fmt.Errorf("give --tenant <org[/team[/project]]> or --everyone: whom the licence is accepted for")
			}
			var st llmapi.LicenceStatus
			if err := c.call("POST", "/llm/models/"+url.PathEscape(args[0])+"/licence/accept", map[string]string{"tenant": tenant}, &st); err != nil || c.json {
				return err
			}
			c.printLicence(st)
			return nil
		}}
	accept.Flags().StringVar(&tenant, "tenant", "", "the organisation, team or project it is accepted for")
	accept.Flags().BoolVar(&everyone, "everyone", false, "accept it for every tenant (the operator's choice)")
	cmd.AddCommand(accept)
	return cmd
}

// printLicence shows a licence and its acceptances.
func (c *ctl) printLicence(st llmapi.LicenceStatus) {
	url := ""
	if st.Licence.URL != "" {
		url = " (" + st.Licence.URL + ")"
	}
	fmt.Fprintf(c.out, "model %s: licence %s%s\n", st.Model, st.Licence.Name, url)
	if len(st.Accepted) == 0 {
		fmt.Fprintln(c.out, "  accepted for nobody yet: every tenant's requests are refused")
		return
	}
	var rows [][]string
	for _, a := range st.Accepted {
		who := a.Tenant
		if who == "" {
			who = "everyone"
		}
		rows = append(rows, []string{who, a.By, a.At.Format("2006-01-02 15:04:05")})
	}
	c.table("ACCEPTED FOR\tBY\tAT", rows)
}
