package cluster

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

// Parse reads a cluster block:
//
//	cluster {
//		redis redis://10.0.0.5:6379/0                   # or:
//		sentinel mymaster 10.0.0.5:26379 10.0.0.6:26379 10.0.0.7:26379
//		username <redis user>                          # with sentinel
//		password {env.REDIS_PASSWORD}                  # with sentinel
//		sentinel_password {env.SENTINEL_PASSWORD}
//		name prod                                      # keys start with llmgw:prod:
//		node gpu-1                                     # default: the host name
//		advertise 10.0.0.11:7443                       # where other nodes reach this one
//		listen 0.0.0.0:7443                            # default: advertise
//		secret {env.LLMGW_CLUSTER_SECRET}              # the same on every node
//		heartbeat 1s
//		node_ttl 5s
//		release_key RWQ…                              # more keys ctl cluster upgrade's releases may be signed by
//	}
func (c *ClusterConfig) Parse(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	return caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "redis":
			return caddyfileutil.OneArg(d, &c.Redis)
		case "sentinel":
			if !d.NextArg() {
				return d.Errf("sentinel needs the primary's name and the Sentinels' addresses: sentinel mymaster host:port…")
			}
			c.SentinelMaster = d.Val()
			if err := caddyfileutil.ManyArgs(d, &c.Sentinels); err != nil {
				return d.Errf("sentinel %s: give the Sentinels' addresses (host:port) after the primary's name", c.SentinelMaster)
			}
			return nil
		case "username":
			return caddyfileutil.OneArg(d, &c.Username)
		case "password":
			return caddyfileutil.OneArg(d, &c.Password)
		case "sentinel_password":
			return caddyfileutil.OneArg(d, &c.SentinelPassword)
		case "name":
			return caddyfileutil.OneArg(d, &c.Name)
		case "node":
			return caddyfileutil.OneArg(d, &c.Node)
		case "advertise":
			return caddyfileutil.OneArg(d, &c.Advertise)
		case "listen":
			return caddyfileutil.OneArg(d, &c.Listen)
		case "secret":
			return caddyfileutil.OneArg(d, &c.Secret)
		case "heartbeat":
			return caddyfileutil.DurationArg(d, &c.Heartbeat)
		case "node_ttl":
			return caddyfileutil.DurationArg(d, &c.NodeTTL)
		case "release_key":
			var k string
			if err := caddyfileutil.OneArg(d, &k); err != nil {
				return err
			}
			c.ReleaseKeys = append(c.ReleaseKeys, k)
			return nil
		default:
			return d.Errf("unrecognized cluster subdirective %q; see docs/cluster.md", dir)
		}
	})
}
