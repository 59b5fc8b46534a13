package presets

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// Parse reads one of the operator's presets, in the llm global option:
//
//	preset <name> {
//		description <text>
//		kind        chat|embeddings|image|3d|workflow
//		automatic                         # added when the cluster can run it
//		# and the model, as in a model block:
//		engine      comfyui
//		resources   { gpus 1 }
//		licence     <name> <url>
//		workflow    txt2img /etc/llmgw/sdxl-txt2img.json { param steps 20 }
//		…
//	}
func Parse(d *caddyfile.Dispenser) (*Preset, error) {
	p := &Preset{}
	if !d.Args(&p.Name) || d.NextArg() {
		return nil, d.ArgErr()
	}
	p.Model.Name = p.Name
	err := caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "description":
			return caddyfileutil.OneArg(d, &p.Description)
		case "kind":
			return caddyfileutil.OneArg(d, &p.Kind)
		case "automatic":
			if d.NextArg() {
				return d.ArgErr()
			}
			p.Automatic = true
			return nil
		}
		return catalog.ParseModelField(d, &p.Model, dir)
	}, "option", "alias", "adapter", "profile", "workflow")
	if err != nil {
		return nil, err
	}
	if err := p.Check(); err != nil {
		return nil, d.Err(err.Error())
	}
	return p, nil
}
