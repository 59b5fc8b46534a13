package llmctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/release"
)

// ReleaseKey is the minisign public key llmgw's releases are signed with
// (deploy/release.pub). llmgw upgrade trusts it, and the keys --key adds.
const ReleaseKey = release.ProjectKey

// upgrader is "llmgw upgrade": its flags, and the admin client that asks
// the running llmgw to restart.
type upgrader struct {
	ctl
	from, binary, service string
	keys                  []string
	rollback, noRestart   bool
	wait                  time.Duration
}

// UpgradeCommand is "llmgw upgrade": it replaces this llmgw's binary with
// a signed release's, then restarts the running llmgw without cutting its
// streams.
func UpgradeCommand() *cobra.Command {
	u := &upgrader{ctl: ctl{out: os.Stdout, errOut: os.Stderr}}
	cmd := &cobra.Command{
		Use:   "upgrade <version|tarball|https URL> | --rollback",
		Short: "Replaces llmgw with a signed release and restarts it without cutting its streams",
		Long: `Replaces the llmgw binary with the one of a release tarball, a file or an
https URL, or a version (v0.16.0) found under --from, which holds the release
files. SHA256SUMS and SHA256SUMS.minisig are read beside the tarball; the
signature must be by llmgw's release key (` + ReleaseKey + `)
or a key given with --key, the tarball's SHA-256 must be in SHA256SUMS, and
its binary must be for this platform. The binary is then replaced atomically;
the old one is kept as <binary>.previous, which --rollback puts back.

Then llmgw restarts: with --service, systemctl restart <unit> (the unit needs
a TimeoutStopSec long enough for open streams: Caddy's stop waits for them);
else the running llmgw (its admin endpoint: --admin or --config, as llmgw ctl)
is asked to restart in place (POST /llm/restart): it stops taking requests,
lets the open ones end, and runs the new binary with the same PID.`,
		Example: "  $ sudo llmgw upgrade v0.16.0 --from https://example.com/llmgw/releases/v0.16.0 --service llmgw\n" +
			"  $ llmgw upgrade ./llmgw_v0.16.0_linux_amd64.tar.gz --config /etc/llmgw/Caddyfile\n  $ llmgw upgrade --rollback",
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return u.run(args) },
	}
	f := cmd.Flags()
	f.StringVar(&u.from, "from", "", "where the release files are (an https URL or a directory), for a version argument")
	f.StringArrayVar(&u.keys, "key", nil, "a minisign public key file to trust besides llmgw's release key (repeatable)")
	f.StringVar(&u.binary, "binary", "", "the llmgw binary to replace (default: this one)")
	f.StringVar(&u.service, "service", "", "restart with systemctl restart <unit> instead of asking the running llmgw")
	f.BoolVar(&u.rollback, "rollback", false, "put <binary>.previous back (the binary the last upgrade replaced) and restart")
	f.BoolVar(&u.noRestart, "no-restart", false, "replace the binary only; the new one runs at the next start")
	f.DurationVar(&u.wait, "wait", 10*time.Minute, "how long to wait for the running llmgw to come back with the new version (its open streams end first)")
	f.StringVar(&u.admin, "admin", os.Getenv("LLMGW_ADMIN"), "the running llmgw's admin endpoint (default $LLMGW_ADMIN, else the --config file's, else localhost:2019)")
	f.StringVar(&u.config, "config", "", "a config file whose admin address to use")
	return cmd
}

func (u *upgrader) run(args []string) error {
	bin, err := u.target()
	if err != nil {
		return err
	}
	switch {
	case u.rollback && len(args) > 0:
		return fmt.Errorf("upgrade: --rollback takes no version or file (it puts %s.previous back)", bin)
	case u.rollback:
		err = release.Rollback(bin)
	case len(args) == 0:
		return fmt.Errorf("upgrade: name a version (with --from), a release tarball or an https URL; or --rollback")
	default:
		err = u.install(args[0], bin)
	}
	if err != nil {
		return err
	}
	want, err := binaryBuild(bin)
	if err != nil {
		return err
	}
	fmt.Fprintf(u.out, "%s is now %s; the one it replaced is %s.previous\n", bin, want.Line(), bin)
	return u.restart(want)
}

// target is the binary to replace: --binary, else this one.
func (u *upgrader) target() (string, error) {
	bin := u.binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("upgrade: finding this binary: %w; name it with --binary", err)
		}
		bin = exe
	}
	bin, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return "", fmt.Errorf("upgrade: the binary to replace: %w", err)
	}
	return filepath.Abs(bin)
}

// install fetches and checks the release src, then puts its binary at bin.
func (u *upgrader) install(src, bin string) error {
	rel, keys, err := u.fetch(src)
	if err != nil {
		return err
	}
	newBin, err := rel.check(keys)
	if err != nil {
		return err
	}
	return release.Replace(bin, newBin)
}

// trusted are the keys a release may be signed with.
func (u *upgrader) trusted() ([]release.PublicKey, error) {
	k, err := release.ParsePublicKey(ReleaseKey)
	if err != nil {
		return nil, err
	}
	keys := []release.PublicKey{k}
	for _, path := range u.keys {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("upgrade: --key: %w", err)
		}
		k, err := release.ParsePublicKey(string(b))
		if err != nil {
			return nil, fmt.Errorf("upgrade: --key %s: %w", path, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// binaryBuild asks a binary for its build (llmgw version --json).
func binaryBuild(bin string) (BuildInfo, error) {
	var b BuildInfo
	out, err := exec.Command(bin, "version", "--json").Output()
	if err == nil {
		err = json.Unmarshal(out, &b)
	}
	if err != nil {
		return b, fmt.Errorf("upgrade: %s version --json: %w", bin, err)
	}
	return b, nil
}

// restart makes the running llmgw run the binary just put in place.
func (u *upgrader) restart(want BuildInfo) error {
	switch {
	case u.noRestart:
		fmt.Fprintln(u.out, "not restarted (--no-restart): the new binary runs at llmgw's next start")
		return nil
	case u.service != "":
		out, err := exec.Command("systemctl", "restart", u.service).CombinedOutput()
		if err != nil {
			return fmt.Errorf("upgrade: systemctl restart %s: %w: %s; the binary is replaced, restart the service yourself", u.service, err, strings.TrimSpace(string(out)))
		}
		fmt.Fprintf(u.out, "restarted the %s service\n", u.service)
		return nil
	}
	return u.restartInPlace(want)
}

// restartInPlace asks the running llmgw to restart (POST /llm/restart)
// and waits until GET /llm/version answers the new build.
func (u *upgrader) restartInPlace(want BuildInfo) error {
	var before BuildInfo
	if err := u.read("/llm/version", &before); err != nil {
		var unreachable *url.Error
		if errors.As(err, &unreachable) {
			fmt.Fprintf(u.out, "no running llmgw answers (%v): the new binary runs at its next start\n", err)
			return nil
		}
		return fmt.Errorf("upgrade: the binary is replaced, but the running llmgw does not answer GET /llm/version (%w): "+
			"a version from before restarts in place; restart it yourself (llmgw stop, then start it again), or use --service", err)
	}
	if err := u.call("POST", "/llm/restart", nil, nil); err != nil {
		return fmt.Errorf("upgrade: the binary is replaced, but asking llmgw (pid %d) to restart failed: %w", before.PID, err)
	}
	fmt.Fprintf(u.out, "llmgw (pid %d) is restarting once its open requests end\n", before.PID)
	deadline := time.Now().Add(u.wait)
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		var now BuildInfo
		if u.read("/llm/version", &now) == nil && now.Version == want.Version && now.Commit == want.Commit {
			fmt.Fprintf(u.out, "llmgw (pid %d) runs %s\n", now.PID, now.Line())
			return nil
		}
	}
	return fmt.Errorf("upgrade: llmgw did not answer with %s within %s (--wait); its open streams may still be ending: check llmgw ctl and its log", want.Version, u.wait)
}

// readAllLimit reads at most n bytes of r, failing beyond.
func readAllLimit(r io.Reader, n int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, n+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if int64(len(b)) > n {
		return nil, fmt.Errorf("reading %s: larger than %d bytes: not an llmgw release file", what, n)
	}
	return b, nil
}
