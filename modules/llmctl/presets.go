package llmctl

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// modelPresets is "llmgw ctl model presets": every preset, what it adds
// and needs, and whether this cluster can run it (and why not).
func (c *ctl) modelPresets() *cobra.Command {
	return &cobra.Command{Use: "presets", Short: "Lists the presets (shipped and the config's), what each needs, and whether this cluster can run it and why not", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var ps []llmapi.PresetStatus
			if err := c.call("GET", "/llm/presets", nil, &ps); err != nil || c.json {
				return err
			}
			var rows [][]string
			for _, p := range ps {
				rows = append(rows, []string{p.Name, dash(p.Kind), p.Engine, presetNeeds(p), presetLicence(p), presetState(p), presetWhy(p)})
			}
			c.table("PRESET\tKIND\tENGINE\tNEEDS\tLICENCE\tSTATE\tWHY NOT", rows)
			return nil
		}}
}

// presetNeeds is the resources a preset's model needs, or -.
func presetNeeds(p llmapi.PresetStatus) string {
	if p.Resources == nil || (p.Resources.Memory == 0 && p.Resources.Cores == 0 && p.Resources.GPUs == 0) {
		return "-"
	}
	return p.Resources.String()
}

func presetLicence(p llmapi.PresetStatus) string {
	if p.Licence == nil {
		return "-"
	}
	return p.Licence.Name
}

// presetState is the state, with the model when added and "automatic".
func presetState(p llmapi.PresetStatus) string {
	s := p.State
	if p.Model != "" {
		s += " as " + p.Model
	}
	if p.State == "declined" && p.DeclinedBy != "" {
		s += " by " + p.DeclinedBy
	}
	if p.Automatic {
		s += " (automatic)"
	}
	return s
}

func presetWhy(p llmapi.PresetStatus) string {
	if len(p.WhyNot) == 0 {
		return "-"
	}
	return strings.Join(p.WhyNot, "; ")
}

// modelAddPreset adds a preset's model (ctl model add --preset).
func (c *ctl) modelAddPreset(preset, name string) error {
	var body map[string]string
	if name != "" {
		body = map[string]string{"name": name}
	}
	var st llmapi.AddedModel
	if err := c.call("POST", "/llm/presets/"+url.PathEscape(preset)+"/add", body, &st); err != nil || c.json {
		return err
	}
	fmt.Fprintf(c.out, "model %s added from preset %s: %s\n", st.Name, preset, st.State)
	var ps llmapi.PresetStatus
	if c.call("GET", "/llm/presets/"+url.PathEscape(preset), nil, &ps) == nil && ps.Licence != nil {
		fmt.Fprintf(c.out, "it is served under the licence %s%s: no tenant can use it until it is accepted (llmgw ctl model licence accept %s --everyone, or --tenant <org[/team[/project]]>)\n",
			ps.Licence.Name, parenURL(ps.Licence.URL), st.Name)
	}
	return nil
}

func parenURL(u string) string {
	if u == "" {
		return ""
	}
	return " (" + u + ")"
}
