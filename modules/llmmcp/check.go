package llmmcp

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxName bounds a server's name and a tenant credential's id.
const maxName = 64

// checkName checks a server's name: 1 to 64 letters, digits, '-' and '_'.
func checkName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%s without a name; give it a name of letters, digits, '-' and '_'", what)
	}
	if len(name) > maxName || strings.IndexFunc(name, func(r rune) bool { return !nameRune(r) }) >= 0 {
		return fmt.Errorf("%s name %q: use 1 to %d letters, digits, '-' and '_'", what, clip(name), maxName)
	}
	return nil
}

func nameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}

// checkTenantName checks a tenant's key id (level key) or level path
// ("acme/research/alpha"): printable, without spaces or ':', each part
// 1 to 64 bytes; a key id has no '/'.
func checkTenantName(level, name string) error {
	bad := func(why string) error {
		return fmt.Errorf("tenant %s %q %s; give the key id, or the level's path such as acme/research (parts of 1 to %d characters, no spaces, ':' or control characters)", level, clip(name), why, maxName)
	}
	if name == "" {
		return bad("is empty")
	}
	if level == "key" && strings.Contains(name, "/") {
		return bad("has a '/' (a key id has none)")
	}
	if i := strings.IndexFunc(name, func(r rune) bool {
		return unicode.IsControl(r) || unicode.IsSpace(r) || r == ':' || r == utf8.RuneError
	}); i >= 0 {
		return bad("has a space, ':' or a control character")
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || len(part) > maxName {
			return bad("has an empty or too long part")
		}
	}
	return nil
}

// clip shortens a value quoted in an error, so a long or hostile one
// cannot flood the message; %q escapes control characters.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// checkURL checks a server's URL: it parses, its scheme is http or https,
// and it names a host.
func checkURL(server, raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("mcp server %q: url %q is not a URL: %v; give http(s)://host[:port]/path", server, clip(raw), unwrapURLErr(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("mcp server %q: url %q must start with http:// or https://", server, clip(raw))
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("mcp server %q: url %q names no host; give http(s)://host[:port]/path", server, clip(raw))
	}
	return nil
}

func unwrapURLErr(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// checkAllowCommands checks allow_commands: absolute, clean glob patterns.
func checkAllowCommands(globs []string) error {
	for _, g := range globs {
		if !filepath.IsAbs(g) || filepath.Clean(g) != g {
			return fmt.Errorf("allow_commands %q: give an absolute, clean path or glob, such as /usr/local/bin/mcp-*", g)
		}
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("allow_commands %q: %v", g, err)
		}
	}
	return nil
}

// commandAllowed reports whether a command matches one of the globs, on
// its absolute, cleaned path.
func commandAllowed(globs []string, command string) bool {
	if !filepath.IsAbs(command) {
		return false
	}
	c := filepath.Clean(command)
	for _, g := range globs {
		if ok, _ := path.Match(g, c); ok {
			return true
		}
	}
	return false
}

// unsafeEnv are environment variables that change what a program runs
// or loads (the dynamic loader's, the shells', interpreters'): a command
// server added at run time may not set them, since its command was
// allowed, not whatever they would make it run.
var unsafeEnv = []string{"PATH", "IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "GCONV_PATH", "HOSTALIASES",
	"NODE_OPTIONS", "NODE_PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONEXECUTABLE",
	"PERL5LIB", "PERL5OPT", "PERLLIB", "RUBYLIB", "RUBYOPT", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
	"CLASSPATH", "GOFLAGS", "NPM_CONFIG_PREFIX", "HOME", "XDG_CONFIG_HOME"}

// unsafeEnvPrefixes are prefixes of such variables.
var unsafeEnvPrefixes = []string{"LD_", "DYLD_", "BASH_FUNC_", "GIT_", "NPM_CONFIG_"}

// checkRuntimeEnv checks the env a command server added at run time sets.
func checkRuntimeEnv(server string, env map[string]string) error {
	for k := range env {
		if k == "" || strings.IndexFunc(k, func(r rune) bool { return !(nameRune(r) && r != '-') }) >= 0 || k[0] >= '0' && k[0] <= '9' {
			return fmt.Errorf("mcp server %q: env %q: a name takes letters, digits and '_', not starting with a digit", server, clip(k))
		}
		u := strings.ToUpper(k)
		bad := false
		for _, p := range unsafeEnvPrefixes {
			bad = bad || strings.HasPrefix(u, p)
		}
		for _, n := range unsafeEnv {
			bad = bad || u == n
		}
		if bad {
			return fmt.Errorf("mcp server %q: env %s changes what the command runs or loads, so a server added at run time may not set it; set it in the config file's server block instead", server, k)
		}
	}
	return nil
}

// checkRuntimeDir checks the working directory of a command server added
// at run time: an absolute, clean path to a directory that exists.
func checkRuntimeDir(server, dir string) error {
	if dir == "" {
		return nil
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("mcp server %q: dir %q: give an absolute, clean path (no .. or trailing /)", server, clip(dir))
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("mcp server %q: dir %q is not a directory", server, clip(dir))
	}
	return nil
}
