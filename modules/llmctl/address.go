package llmctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
)

// addressOrder is ctl's help on where it finds the admin endpoint, in the
// order resolve follows.
const addressOrder = `Where ctl finds the admin endpoint, first match wins:
  1. --admin ADDR (or --url URL: a site's llm_admin)
  2. $LLMGW_ADMIN_URL, a site's llm_admin such as https://gw.example.com/llm
     ($LLMGW_ADMIN, an admin address, is read at this step too, after it)
  3. the admin address of the config file --config names (as llmgw reload reads it)
  4. the running llmgw's autosaved config (autosave.json in Caddy's config
     directory, $XDG_CONFIG_HOME/caddy or ~/.config/caddy): its admin listen address
  5. localhost:2019`

// resolve settles the address ctl talks to, once: c.admin or c.url is
// set, and c.from says where it came from (for errors).
func (c *ctl) resolve() error {
	if c.from != "" {
		return nil
	}
	switch {
	case c.url != "":
		c.from = "--url"
	case c.admin != "":
		c.from = "--admin"
	case os.Getenv("LLMGW_ADMIN_URL") != "":
		c.url, c.from = os.Getenv("LLMGW_ADMIN_URL"), "$LLMGW_ADMIN_URL"
	case os.Getenv("LLMGW_ADMIN") != "":
		c.admin, c.from = os.Getenv("LLMGW_ADMIN"), "$LLMGW_ADMIN"
	case c.config != "":
		addr, err := caddycmd.DetermineAdminAPIAddress("", nil, c.config, "")
		if err != nil {
			return fmt.Errorf("reading the admin address of --config %s: %w; fix the file, or give --admin", c.config, err)
		}
		c.admin, c.from = addr, "the admin address of "+c.config
	default:
		addr, file, err := autosavedAdmin()
		if err != nil {
			return err
		}
		c.admin, c.from = addr, "the running llmgw's "+file
		if addr == "" {
			c.admin, c.from = caddy.DefaultAdminListen, "the default"
		}
	}
	return nil
}

// autosavedAdmin reads the admin listen address of the config a running
// llmgw autosaved (caddy.ConfigAutosavePath, looked up now so that
// $XDG_CONFIG_HOME counts); "" when there is no such file or it names
// none.
func autosavedAdmin() (addr, file string, err error) {
	file = filepath.Join(caddy.AppConfigDir(), "autosave.json")
	raw, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", file, nil
	}
	if err != nil {
		return "", file, fmt.Errorf("reading the running llmgw's config %s for its admin address: %w; give --admin", file, err)
	}
	var cfg struct {
		Admin *struct {
			Disabled bool   `json:"disabled"`
			Listen   string `json:"listen"`
		} `json:"admin"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return "", file, fmt.Errorf("reading the running llmgw's config %s for its admin address: %v; give --admin", file, err)
	}
	if cfg.Admin == nil || cfg.Admin.Disabled {
		return "", file, nil
	}
	return cfg.Admin.Listen, file, nil
}
