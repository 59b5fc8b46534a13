package weights

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

// Parse reads the mirror block of the llm global option:
//
//	mirror {
//		store <name> dir <path>
//		store <name> s3 {
//			endpoint       <host:port>
//			bucket         <bucket>
//			prefix         <prefix>
//			region         <region>
//			tls
//			access_key_env <VAR>    # default AWS_ACCESS_KEY_ID
//			secret_key_env <VAR>    # default AWS_SECRET_ACCESS_KEY
//			part_size      <size>   # default 16MiB
//		}
//		cache         <dir> [<max size>]
//		registry      <url>         # default $HF_ENDPOINT
//		sync_interval <duration>    # default 5m
//		verify_every  <n>           # default 288; -1 never
//	}
func (c *MirrorConfig) Parse(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	err := caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "store":
			return c.parseStore(d)
		case "cache":
			if !d.NextArg() {
				return d.ArgErr()
			}
			c.Cache = d.Val()
			if d.NextArg() {
				n, perr := humanize.ParseBytes(d.Val())
				if perr != nil {
					return d.Errf("cache size %q is not a size such as 200GiB", d.Val())
				}
				c.CacheSize = int64(n)
			}
			if d.NextArg() {
				return d.ArgErr()
			}
		case "registry":
			return caddyfileutil.OneArg(d, &c.Registry)
		case "sync_interval":
			return caddyfileutil.DurationArg(d, &c.SyncInterval)
		case "verify_every":
			return caddyfileutil.IntArg(d, &c.VerifyEvery, -1)
		default:
			return d.Errf("unrecognized mirror subdirective %q; use store, cache, registry, sync_interval or verify_every", dir)
		}
		return nil
	}, "store")
	if err != nil {
		return err
	}
	if len(c.Stores) > 2 {
		return d.Errf("the mirror takes one or two stores, not %d", len(c.Stores))
	}
	return nil
}

func (c *MirrorConfig) parseStore(d *caddyfile.Dispenser) error {
	sc := new(StoreConfig)
	if !d.NextArg() {
		return d.ArgErr()
	}
	sc.Name = d.Val()
	for _, o := range c.Stores {
		if o.Name == sc.Name {
			return d.Errf("store %q is configured twice", sc.Name)
		}
	}
	if !d.NextArg() {
		return d.Errf("store %s: give its type, dir <path> or s3 { … }", sc.Name)
	}
	sc.Type = d.Val()
	switch sc.Type {
	case "dir":
		if !d.NextArg() {
			return d.Errf("store %s: a dir store needs a path", sc.Name)
		}
		sc.Path = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	case "s3":
		if d.NextArg() {
			return d.ArgErr()
		}
		err := caddyfileutil.EachSubdirective(d, func(dir string) error {
			switch dir {
			case "endpoint":
				return caddyfileutil.OneArg(d, &sc.Endpoint)
			case "bucket":
				return caddyfileutil.OneArg(d, &sc.Bucket)
			case "prefix":
				return caddyfileutil.OneArg(d, &sc.Prefix)
			case "region":
				return caddyfileutil.OneArg(d, &sc.Region)
			case "tls":
				if d.NextArg() {
					return d.ArgErr()
				}
				sc.TLS = true
			case "access_key_env":
				return caddyfileutil.OneArg(d, &sc.AccessKeyEnv)
			case "secret_key_env":
				return caddyfileutil.OneArg(d, &sc.SecretKeyEnv)
			case "part_size":
				return caddyfileutil.SizeArg(d, &sc.PartSize, "part_size", "16MiB")
			default:
				return d.Errf("unrecognized s3 store subdirective %q", dir)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if sc.Endpoint == "" || sc.Bucket == "" {
			return d.Errf("store %s: an s3 store needs endpoint and bucket", sc.Name)
		}
	default:
		return d.Errf("store %s: type %q is not dir or s3", sc.Name, sc.Type)
	}
	c.Stores = append(c.Stores, sc)
	return nil
}
