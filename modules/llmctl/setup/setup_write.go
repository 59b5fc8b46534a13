package setup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// change is a file whose content or mode is not as setup would write it.
type change struct {
	setupFile
	old    []byte
	exists bool
}

// changes compares the files with what is on disk.
func changes(files []setupFile) ([]change, error) {
	var out []change
	for _, f := range files {
		old, err := os.ReadFile(f.Path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("reading %s: %w", f.Path, err)
		}
		c := change{setupFile: f, old: old, exists: err == nil}
		if c.exists && bytes.Equal(old, f.Content) {
			if info, err := os.Stat(f.Path); err == nil && info.Mode().Perm() == f.Mode {
				continue
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// show prints each change: a new file whole (secrets hidden), a changed
// one as a line diff.
func showChanges(w io.Writer, cs []change) {
	for _, c := range cs {
		switch {
		case !c.exists:
			fmt.Fprintf(w, "\nnew file %s (mode %04o):\n", c.Path, c.Mode)
			lineDiff(w, "", string(c.Content), c.Secret)
		case bytes.Equal(c.old, c.Content):
			fmt.Fprintf(w, "\n%s: mode to %04o\n", c.Path, c.Mode)
		default:
			fmt.Fprintf(w, "\n--- %s (now)\n+++ %s (after setup)\n", c.Path, c.Path)
			lineDiff(w, string(c.old), string(c.Content), c.Secret)
		}
	}
}

// write shows what would change, asks (or takes --yes), writes, prints
// the new secrets once and, with --enable, starts the service.
func (r *setupRun) write(a *setupAnswers, p *prompter) error {
	secret, err := makeSecrets(a)
	if err != nil {
		return err
	}
	files, err := plan(a)
	if err != nil {
		return err
	}
	cs, err := changes(files)
	if err != nil {
		return err
	}
	if len(cs) == 0 {
		fmt.Fprintf(r.out, "\nNothing to change: %s already hold what these answers make.\n", fileList(files))
		return r.finish(a, secret, nil)
	}
	showChanges(r.out, cs)
	if ok, err := r.confirm(p, cs); err != nil || !ok {
		return err
	}
	for _, c := range cs {
		if err := writeFile(c.setupFile); err != nil {
			return err
		}
		fmt.Fprintf(r.out, "wrote %s\n", c.Path)
	}
	if err := os.MkdirAll(a.Data, 0o750); err != nil {
		return fmt.Errorf("making the data directory: %w", err)
	}
	return r.finish(a, secret, cs)
}

// confirm asks before changing files that exist: a person on the
// terminal, or --yes in a script. New files alone need no confirmation
// in a script.
func (r *setupRun) confirm(p *prompter, cs []change) (bool, error) {
	existing := 0
	for _, c := range cs {
		if c.exists {
			existing++
		}
	}
	switch {
	case r.yes:
		return true, nil
	case p != nil:
		ok, err := p.yes(fmt.Sprintf("\nWrite %s?", plural(len(cs), "file")), existing == 0)
		if err == nil && !ok {
			fmt.Fprintln(r.out, "Nothing was written.")
		}
		return ok, err
	case existing > 0:
		return false, fmt.Errorf("setup: %s would change (shown above); nothing was written: run again with --yes to write the changes", plural(existing, "existing file"))
	}
	return true, nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func fileList(files []setupFile) string {
	var names []string
	for _, f := range files {
		names = append(names, f.Path)
	}
	return strings.Join(names, ", ")
}

// writeFile writes a file whole or not at all (a temp file renamed), with
// its mode.
func writeFile(f setupFile) error {
	err := replaceFile(f)
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("writing %s: %w; run setup as root (sudo), or give directories you may write (--dir, --units)", f.Path, err)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", f.Path, err)
	}
	return nil
}

func replaceFile(f setupFile) error {
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), "."+filepath.Base(f.Path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err = tmp.Chmod(f.Mode); err == nil {
		_, err = tmp.Write(f.Content)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.Path)
	}
	return err
}

// finish prints the secrets made by this run (once), what to do next,
// and with --enable makes the service run.
func (r *setupRun) finish(a *setupAnswers, s secrets, cs []change) error {
	w := r.out
	fmt.Fprintln(w)
	if s.Token != "" {
		fmt.Fprintf(w, "admin token (shown once; only its SHA-256 is kept): %s\n", s.Token)
	} else if a.needsToken() {
		fmt.Fprintln(w, "admin token: the one made by the last setup is kept (--new-admin-token makes another)")
	}
	if s.Key != "" {
		fmt.Fprintf(w, "API key %q of %s (shown once; only its SHA-256 is kept): %s\n", a.KeyID, a.Tenant, s.Key)
	} else if a.Key {
		fmt.Fprintf(w, "API key %q of %s: the one made by the last setup is kept (--new-key makes another)\n", a.KeyID, a.Tenant)
	}
	base := siteURL(a.Listen)
	fmt.Fprintf(w, "\nThe API: %s/v1 (OpenAI-compatible; send the key as Authorization: Bearer <key>)\n", base)
	if a.Console {
		fmt.Fprintf(w, "The console: %s/console/ (sign in with the admin token)\n", base)
	}
	if _, err := os.Stat(a.Binary); err != nil && a.Units != "" && !r.enable {
		fmt.Fprintf(w, "Note: the unit runs %s, which does not exist: install llmgw there (install -m 0755 llmgw %s), or run setup with --enable\n", a.Binary, a.Binary)
	}
	if !r.enable {
		if a.Units != "" {
			fmt.Fprintf(w, "Run it: systemctl daemon-reload && systemctl enable --now %s (or llmgw setup --enable)\n", a.unitName(true))
		} else {
			fmt.Fprintf(w, "Run it: llmgw run --config %s\n", filepath.Join(a.Dir, "Caddyfile"))
		}
		return nil
	}
	return r.enableService(a, cs)
}

// siteURL is where a person reaches a site address from this machine.
func siteURL(listen string) string {
	switch {
	case strings.HasPrefix(listen, ":"):
		return "http://localhost" + listen
	case strings.Contains(listen, ":"):
		return "http://" + listen
	}
	return "https://" + listen
}

// enableService creates the user, installs the binary, and enables and
// (re)starts the unit: a changed unit restarts it, a changed config
// reloads it.
func (r *setupRun) enableService(a *setupAnswers, cs []change) error {
	if a.Units == "" {
		return fmt.Errorf("setup: --enable needs a unit: give --units /etc/systemd/system")
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("setup: --enable creates a user and starts a system service: run it as root (sudo)")
	}
	steps := []func(*setupAnswers) error{ensureUser, r.installBinary, ownData}
	for _, s := range steps {
		if err := s(a); err != nil {
			return err
		}
	}
	unit, action := a.unitName(true), "reload-or-restart"
	for _, c := range cs {
		if strings.HasSuffix(c.Path, ".service") {
			action = "restart"
		}
	}
	for _, args := range [][]string{{"daemon-reload"}, {"enable", unit}, {action, unit}} {
		if err := r.systemctl(args...); err != nil {
			return err
		}
	}
	fmt.Fprintf(r.out, "%s is enabled and running: systemctl status %s, journalctl -u %s\n", unit, unit, unit)
	return nil
}

func (r *setupRun) systemctl(args ...string) error {
	cmd := exec.Command("systemctl", args...)
	cmd.Stdout, cmd.Stderr = r.out, r.cmd.ErrOrStderr()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("setup: systemctl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// ensureUser creates the service's system user when it does not exist.
func ensureUser(a *setupAnswers) error {
	if _, err := user.Lookup(a.User); err == nil {
		return nil
	}
	out, err := exec.Command("useradd", "--system", "--user-group", "--home-dir", a.Data, "--no-create-home",
		"--shell", "/usr/sbin/nologin", "--comment", "llmgw gateway", a.User).CombinedOutput()
	if err != nil {
		return fmt.Errorf("setup: creating the user %s: %v: %s", a.User, err, bytes.TrimSpace(out))
	}
	return nil
}

// installBinary copies this llmgw to --bin when nothing is there.
func (r *setupRun) installBinary(a *setupAnswers) error {
	if _, err := os.Stat(a.Binary); err == nil {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("setup: finding this binary to install as %s: %w", a.Binary, err)
	}
	b, err := os.ReadFile(self)
	if err == nil {
		err = writeFile(setupFile{Path: a.Binary, Content: b, Mode: 0o755})
	}
	if err != nil {
		return fmt.Errorf("setup: installing %s: %w", a.Binary, err)
	}
	fmt.Fprintf(r.out, "installed %s\n", a.Binary)
	return nil
}

// ownData gives the data directory to the service's user.
func ownData(a *setupAnswers) error {
	u, err := user.Lookup(a.User)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.WalkDir(a.Data, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}
