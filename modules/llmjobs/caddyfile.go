package llmjobs

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_jobs", parseCaddyfile)
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	j := new(Jobs)
	err := j.UnmarshalCaddyfile(h.Dispenser)
	return j, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	llm_jobs [<matcher>] {
//		retention    <duration>   # finished jobs kept; default 24h
//		max_queued   <n>          # jobs waiting per model; default 1000
//		max_workflow <size>       # default 8MiB
//		max_input_size <size>     # one input file; default 16MiB
//		max_inputs   <n>          # input files of a job; default 8
//	}
func (j *Jobs) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	return caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "retention":
			return caddyfileutil.DurationArg(d, &j.Retention)
		case "max_queued":
			return caddyfileutil.IntArg(d, &j.MaxQueued, 1)
		case "max_workflow":
			return caddyfileutil.SizeArg(d, &j.MaxWorkflow, "max_workflow", "8MiB")
		case "max_input_size":
			return caddyfileutil.SizeArg(d, &j.MaxInputSize, "max_input_size", "16MiB")
		case "max_inputs":
			return caddyfileutil.IntArg(d, &j.MaxInputs, 1)
		}
		return d.Errf("unrecognized llm_jobs subdirective %q; use retention, max_queued, max_workflow, max_input_size or max_inputs", dir)
	})
}

var _ caddyfile.Unmarshaler = (*Jobs)(nil)
