package llmctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/weights"
)

// mirrorCommand is "llmgw mirror": the weights mirror, worked on directly
// through the stores the config's apps.llm.mirror names.
func mirrorCommand() caddycmd.Command {
	return caddycmd.Command{
		Name:  "mirror",
		Short: "Manages the weights mirror: model versions in the stores the config names",
		Long: `
Works on the weights mirror directly, against the stores named in the llm
app's mirror block of the config (--config, default ./Caddyfile); llmgw need
not be running. Versions are added from a local path, an http(s) URL or a
registry reference hf://org/repo[@revision][/path], checksummed, stored on
every store that answers, and copied to the others by sync.`,
		CobraFunc: func(cmd *cobra.Command) {
			mc := &mirrorCmd{out: os.Stdout, errOut: os.Stderr}
			mc.register(cmd)
		},
	}
}

// mirrorCmd is "llmgw mirror": its global flags, and where it prints.
type mirrorCmd struct {
	config, adapter string
	json            bool   // print JSON or YAML (--output), not tables
	output          string // --output: table, json or yaml
	out, errOut     io.Writer
}

// register puts mirror's flags and subcommands on cmd.
func (mc *mirrorCmd) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVarP(&mc.config, "config", "c", "", "the config file (default ./Caddyfile)")
	cmd.PersistentFlags().StringVarP(&mc.adapter, "adapter", "a", "", "the config adapter")
	outputFlags(cmd, &mc.output, &mc.json)
	cmd.AddCommand(mc.add(), mc.list(), mc.show(), mc.fetch(), mc.verify(), mc.remove(), mc.purge(), mc.sync(), mc.updates(), mc.update(), mc.rollback())
	withExamples(cmd)
}

// open builds the mirror the config describes.
func (mc *mirrorCmd) open() (*mirror.Mirror, error) {
	mcfg, err := mc.mirrorConfig()
	if err != nil {
		return nil, err
	}
	logger := zap.NewNop()
	if os.Getenv("LLMGW_MIRROR_DEBUG") != "" {
		logger, _ = zap.NewDevelopment()
	}
	return weights.NewMirror(mcfg, caddy.AppDataDir(), logger)
}

// mirrorConfig reads the config file (adapted, a Caddyfile by default)
// and decodes its apps.llm.mirror, nil when it has none.
func (mc *mirrorCmd) mirrorConfig() (*weights.MirrorConfig, error) {
	cfgFile := mc.config
	if cfgFile == "" {
		if _, err := os.Stat("Caddyfile"); err != nil {
			return nil, errors.New("no config: give --config with the llmgw config whose mirror block names the stores")
		}
		cfgFile = "Caddyfile"
	}
	raw, err := os.ReadFile(cfgFile)
	if err != nil {
		return nil, fmt.Errorf("reading the config: %w", err)
	}
	adapter := mc.adapter
	if base := filepath.Base(cfgFile); adapter == "" && (strings.HasPrefix(base, "Caddyfile") || strings.HasSuffix(base, ".caddyfile")) {
		adapter = "caddyfile"
	}
	if adapter != "" {
		ad := caddyconfig.GetAdapter(adapter)
		if ad == nil {
			return nil, fmt.Errorf("unknown config adapter %q", adapter)
		}
		if raw, _, err = ad.Adapt(raw, map[string]any{"filename": cfgFile}); err != nil {
			return nil, fmt.Errorf("adapting %s: %w", cfgFile, err)
		}
	}
	var cfg struct {
		Apps struct {
			LLM *struct {
				Mirror *weights.MirrorConfig `json:"mirror"`
			} `json:"llm"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("reading %s: %w", cfgFile, err)
	}
	if cfg.Apps.LLM == nil {
		return nil, nil
	}
	return cfg.Apps.LLM.Mirror, nil
}

func (mc *mirrorCmd) print(v any) error { return printValue(mc.out, mc.output, v) }

// run opens the mirror the config names and runs f with a context that
// ends on Ctrl-C.
func (mc *mirrorCmd) run(f func(ctx context.Context, m *mirror.Mirror, args []string) error) func(*cobra.Command, []string) error {
	return func(_ *cobra.Command, args []string) error {
		m, err := mc.open()
		if err != nil {
			return err
		}
		ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
		defer cancel()
		return f(ctx, m, args)
	}
}

// showProgress draws the transfers under way on stderr until stopped: a bar
// on a terminal, a line every 10 s otherwise. Stopping waits for the last
// line to be cleared.
func (mc *mirrorCmd) showProgress(m *mirror.Mirror) func() {
	done, finished := make(chan struct{}), make(chan struct{})
	tty := false
	if f, ok := mc.errOut.(*os.File); ok {
		fi, _ := f.Stat()
		tty = fi != nil && fi.Mode()&os.ModeCharDevice != 0
	}
	every := 5 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprint(mc.errOut, "\r\033[K")
				}
				return
			case <-tick.C:
			}
			for _, p := range m.Transfers() {
				if tty {
					fmt.Fprintf(mc.errOut, "\r\033[K%s %s", bar(p.Bytes, p.Total, 30), p)
				} else {
					fmt.Fprintln(mc.errOut, p)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func bar(done, total int64, width int) string {
	n := width
	if total > 0 {
		n = int(int64(width) * min(done, total) / total)
	}
	return "[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + "]"
}

func (mc *mirrorCmd) add() *cobra.Command {
	var o mirror.AddOptions
	cmd := &cobra.Command{Use: "add <model> <source>", Short: "Adds a version from a local path, an http(s) URL or hf://org/repo[@revision][/path]",
		Args: cobra.ExactArgs(2),
		RunE: mc.run(func(ctx context.Context, m *mirror.Mirror, args []string) error {
			o.Model, o.Source = args[0], args[1]
			stop := mc.showProgress(m)
			res, err := m.Add(ctx, o)
			stop()
			if err != nil {
				return err
			}
			if mc.json {
				return mc.print(res)
			}
			fmt.Fprintf(mc.out, "added %s/%s (%s, %d files, %s) to %s\n", res.Manifest.Model, res.Manifest.Version, res.Manifest.Format,
				len(res.Manifest.Files), humanize.IBytes(uint64(res.Manifest.Size())), strings.Join(res.Stored, ", "))
			if perr := res.PendingError(); perr != nil {
				fmt.Fprintln(mc.errOut, perr)
			}
			return nil
		})}
	cmd.Flags().StringVar(&o.Version, "version", "", "the version's name (default: the registry commit, or a hash of the contents)")
	cmd.Flags().BoolVar(&o.AllowPickle, "allow-pickle", false, "let pickle formats (.bin, .pt, .pth, .ckpt, .pkl) in")
	cmd.Flags().BoolVar(&o.Track, "track", false, "follow the hf:// repository for updates and make this version current")
	return cmd
}

func (mc *mirrorCmd) list() *cobra.Command {
	return &cobra.Command{Use: "list", Short: "Lists the versions and the stores holding each", Args: cobra.NoArgs,
		RunE: mc.run(func(ctx context.Context, m *mirror.Mirror, args []string) error {
			list, err := m.List(ctx)
			if err != nil && len(list) == 0 {
				return err
			}
			if err != nil {
				fmt.Fprintln(mc.errOut, "warning:", err)
			}
			if mc.json {
				return mc.print(list)
			}
			var rows [][]string
			for _, v := range list {
				cur := ""
				if v.Current {
					cur = "*"
				}
				rows = append(rows, []string{v.Model, v.Version + cur, v.Format, fmt.Sprint(v.Files), humanize.IBytes(uint64(v.Size)),
					strings.Join(v.Stores, ","), v.Added.Format(time.RFC3339), v.Origin.Source})
			}
			printTable(mc.out, "MODEL\tVERSION\tFORMAT\tFILES\tSIZE\tSTORES\tADDED\tSOURCE", rows)
			return nil
		})}
}

// versionArgs reads <model> [<version>]; no version means the current one.
func versionArgs(ctx context.Context, m *mirror.Mirror, args []string) (string, string, error) {
	if len(args) == 2 {
		return args[0], args[1], nil
	}
	v, err := m.Current(ctx, args[0])
	return args[0], v, err
}

func (mc *mirrorCmd) show() *cobra.Command {
	return &cobra.Command{Use: "show <model> [<version>]", Short: "Shows a version's manifest", Args: cobra.RangeArgs(1, 2),
		RunE: mc.run(func(ctx context.Context, m *mirror.Mirror, args []string) error {
			model, version, err := versionArgs(ctx, m, args)
			if err != nil {
				return err
			}
			man, err := m.Show(ctx, model, version)
			if err != nil {
				return err
			}
			if mc.json {
				return mc.print(man)
			}
			fmt.Fprintf(mc.out, "%s/%s  format %s  added %s\nsource %s\n", man.Model, man.Version, man.Format, man.Added.Format(time.RFC3339), man.Origin.Source)
			if man.Origin.Commit != "" {
				fmt.Fprintf(mc.out, "repository %s  revision %s  commit %s\n", man.Origin.Repository, man.Origin.Revision, man.Origin.Commit)
			}
			var rows [][]string
			for _, f := range man.Files {
				rows = append(rows, []string{f.Path, humanize.IBytes(uint64(f.Size)), f.SHA256})
			}
			printTable(mc.out, "FILE\tSIZE\tSHA256", rows)
			return nil
		})}
}

func (mc *mirrorCmd) fetch() *cobra.Command {
	return &cobra.Command{Use: "fetch <model> [<version>]", Short: "Fetches a version to this node's cache (verified; a bad copy there is replaced), ahead of its first replica", Args: cobra.RangeArgs(1, 2),
		RunE: mc.run(func(ctx context.Context, m *mirror.Mirror, args []string) error {
			model, version, err := versionArgs(ctx, m, args)
			if err != nil {
				return err
			}
			stop := mc.showProgress(m)
			// A copy already here is read again: a file that no longer
			// matches is fetched anew from a good store.
			replaced, err := m.Recheck(ctx, model, version)
			var fe *mirror.Fetched
			if err == nil {
				fe, err = m.Fetch(ctx, model, version)
			}
			stop()
			if err != nil {
				return err
			}
			fe.Release()
			if mc.json {
				return mc.print(map[string]any{"dir": fe.Dir, "manifest": fe.Manifest, "replaced": replaced})
			}
			for _, f := range replaced {
				fmt.Fprintf(mc.out, "%s: the node cache's copy did not match its manifest; replaced from a store\n", f)
			}
			fmt.Fprintf(mc.out, "%s/%s is in %s\n", model, version, fe.Dir)
			return nil
		})}
}

func (mc *mirrorCmd) verify() *cobra.Command {
	return &cobra.Command{Use: "verify <model> [<version>]", Short: "Reads every file on every store and checks its sha256", Args: cobra.RangeArgs(1, 2),
		RunE: mc.run(func(ctx context.Context, m *mirror.Mirror, args []string) error {
			model, version, err := versionArgs(ctx, m, args)
			if err != nil {
				return err
			}
			checks, err := m.Verify(ctx, model, version)
			if err != nil {
				return err
			}
			bad := 0
			for _, c := range checks {
				if c.Status != "ok" {
					bad++
				}
			}
			if mc.json {
				if err := mc.print(checks); err != nil {
					return err
				}
			} else {
				var rows [][]string
				for _, c := range checks {
					rows = append(rows, []string{c.Store, c.File, c.Status, c.Detail})
				}
				printTable(mc.out, "STORE\tFILE\tSTATUS\tDETAIL", rows)
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d copies failed; llmgw mirror sync copies a good one over each", bad, len(checks))
			}
			return nil
		})}
}

func (mc *mirrorCmd) remove() *cobra.Command {
	return &cobra.Command{Use: "remove <model> <version>", Short: "Removes a version from every store (a tombstone keeps it from coming back)", Args: cobra.ExactArgs(2),
		RunE: mc.run(func(ctx context.Context, m *mirror.Mirror, args []string) error {
			res, err := m.Remove(ctx, args[0], args[1], actor())
			if err != nil {
				return err
			}
			if mc.json {
				return mc.print(res)
			}
			fmt.Fprintf(mc.out, "removed %s/%s from %s\n", args[0], args[1], strings.Join(res.Removed, ", "))
			for s, e := range res.Pending {
				fmt.Fprintf(mc.errOut, "%s; %s removes it when it answers\n", e, s)
			}
			return nil
		})}
}

func (mc *mirrorCmd) purge() *cobra.Command {
	return &cobra.Command{Use: "purge <model>", Short: "Removes every version of a model", Args: cobra.ExactArgs(1),
		RunE: mc.run(func(ctx context.Context, m *mirror.Mirror, args []string) error {
			removed, err := m.Purge(ctx, args[0], actor(), nil)
			if mc.json {
				if perr := mc.print(removed); perr != nil {
					return perr
				}
			} else if len(removed) > 0 {
				fmt.Fprintf(mc.out, "removed %s versions %s\n", args[0], strings.Join(removed, ", "))
			}
			return err
		})}
}

func (mc *mirrorCmd) sync() *cobra.Command {
	var deep bool
	cmd := &cobra.Command{Use: "sync", Short: "Brings the stores in step: removals, missing versions, bad copies", Args: cobra.NoArgs,
		RunE: mc.run(func(ctx context.Context, m *mirror.Mirror, args []string) error {
			stop := mc.showProgress(m)
			rep, err := m.Sync(ctx, deep)
			stop()
			if mc.json {
				if perr := mc.print(map[string]any{"report": rep, "status": m.Status()}); perr != nil {
					return perr
				}
				return err
			}
			for _, c := range rep.Copied {
				fmt.Fprintln(mc.out, "copied", c)
			}
			for _, r := range rep.Removed {
				fmt.Fprintln(mc.out, "removed", r)
			}
			for _, r := range rep.Repaired {
				fmt.Fprintln(mc.out, "repaired", r)
			}
			var rows [][]string
			for _, s := range m.Status().Stores {
				state := "ok"
				if !s.Reachable {
					state = "unreachable"
				}
				rows = append(rows, []string{s.Name, state, fmt.Sprint(s.Versions), fmt.Sprintf("%d versions, %s, %d removals", s.LagVersions, humanize.IBytes(uint64(s.LagBytes)), s.LagRemovals)})
			}
			printTable(mc.out, "STORE\tSTATE\tVERSIONS\tBEHIND", rows)
			return err
		})}
	cmd.Flags().BoolVar(&deep, "deep", false, "read every stored file and check its sha256 first")
	return cmd
}

func (mc *mirrorCmd) updates() *cobra.Command {
	return &cobra.Command{Use: "updates", Short: "Says which tracked repositories moved on", Args: cobra.NoArgs,
		RunE: mc.run(func(ctx context.Context, m *mirror.Mirror, args []string) error {
			ups, err := m.Updates(ctx)
			if mc.json {
				if perr := mc.print(ups); perr != nil {
					return perr
				}
				return err
			}
			var rows [][]string
			for _, u := range ups {
				state := "up to date"
				if u.Moved {
					state = "moved to " + u.Latest
				}
				rows = append(rows, []string{u.Model, u.Source, u.Current, state})
			}
			printTable(mc.out, "MODEL\tSOURCE\tCURRENT\tSTATE", rows)
			return err
		})}
}

func (mc *mirrorCmd) update() *cobra.Command {
	return &cobra.Command{Use: "update <model>", Short: "Fetches a tracked model's new revision beside the old one and makes it current", Args: cobra.ExactArgs(1),
		RunE: mc.run(func(ctx context.Context, m *mirror.Mirror, args []string) error {
			stop := mc.showProgress(m)
			res, err := m.UpdateModel(ctx, args[0])
			stop()
			if err != nil {
				return err
			}
			if mc.json {
				return mc.print(res)
			}
			fmt.Fprintf(mc.out, "%s is now at %s (commit %s)\n", args[0], res.Manifest.Version, res.Manifest.Origin.Commit)
			return nil
		})}
}

func (mc *mirrorCmd) rollback() *cobra.Command {
	return &cobra.Command{Use: "rollback <model>", Short: "Makes a model's previous version current again", Args: cobra.ExactArgs(1),
		RunE: mc.run(func(ctx context.Context, m *mirror.Mirror, args []string) error {
			t, err := m.Rollback(ctx, args[0])
			if err != nil {
				return err
			}
			if mc.json {
				return mc.print(t)
			}
			fmt.Fprintf(mc.out, "%s is back at %s\n", args[0], t.Current)
			return nil
		})}
}
