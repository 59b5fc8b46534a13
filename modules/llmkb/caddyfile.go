package llmkb

import (
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_kb", parseCaddyfile)
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	k := new(KB)
	err := k.UnmarshalCaddyfile(h.Dispenser)
	return k, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	llm_kb [<matcher>] {
//		embedder      <model>
//		postgres      <dsn>
//		max_file_size <size>        # such as 512MiB
//		max_results   <n>
//		index_memory  <size>
//		ingest_lease  <duration>    # default 30s
//		stores_for    <org[/team[/project]]> <vs_id>...   # repeatable
//	}
func (k *KB) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	return caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "embedder":
			return caddyfileutil.OneArg(d, &k.Embedder)
		case "postgres":
			return caddyfileutil.OneArg(d, &k.Postgres)
		case "max_file_size":
			return caddyfileutil.SizeArg(d, &k.MaxFileSize, dir, "512MiB")
		case "index_memory":
			return caddyfileutil.SizeArg(d, &k.IndexMemory, dir, "64MiB")
		case "ingest_lease":
			return caddyfileutil.DurationArg(d, &k.IngestLease)
		case "max_results":
			return caddyfileutil.IntArg(d, &k.MaxResults, 1)
		case "stores_for":
			args := d.RemainingArgs()
			if len(args) < 2 {
				return d.Errf("stores_for: give a tenant path (org, org/team or org/team/project) and the vector store ids its keys answer from")
			}
			if k.StoresFor == nil {
				k.StoresFor = map[string][]string{}
			}
			k.StoresFor[strings.Trim(args[0], "/")] = args[1:]
			return nil
		}
		return d.Errf("unknown subdirective %q of llm_kb (embedder, postgres, max_file_size, max_results, index_memory, ingest_lease, stores_for)", dir)
	}, "stores_for")
}

// defaultStores are the stores the configuration gives the caller's
// project: the entry of its project, else its team's, else its
// organisation's.
func (k *KB) defaultStores(c caller) []string {
	if len(k.StoresFor) == 0 || c.project == "" {
		return nil
	}
	for _, p := range []string{c.project, c.team, c.org} {
		if ids, ok := k.StoresFor[p]; ok {
			return ids
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*KB)(nil)
