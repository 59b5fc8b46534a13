// Package llmctl is llmgw's operator command line: "llmgw ctl", which
// reads and changes a running llmgw through the llm routes of its admin
// endpoint (or a site's llm_admin handler), and "llmgw mirror", which works
// on the weights mirror the config names without llmgw running.
//
// ctl speaks to the gateway only through HTTP and the JSON shapes of
// modules/llm/llmapi (with catalog and tenancy for the types those carry);
// mirror reads only apps.llm.mirror of the config, into
// weights.MirrorConfig. Neither imports the llm app itself
// (imports_test.go checks), so the command line builds and is tested
// apart from the gateway. Commands returns the commands; the llmgw
// package registers them with Caddy's command line in its init, which
// keeps them in both cmd/llmgw and xcaddy builds.
//
// Each command group lives in a file of its own (models.go, keys.go,
// tenants.go, …); client.go holds what they share: the admin client, the
// errors it returns and the tables it prints.
package llmctl
