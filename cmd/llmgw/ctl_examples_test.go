package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llmctl"
)

// TestEveryCommandHasExamples walks the llmgw command tree under the
// commands llmgw adds (ctl, mirror, version, …) and fails on a runnable
// command without an Example, or with an example line that names a
// command or a flag it does not have.
func TestEveryCommandHasExamples(t *testing.T) {
	root := rootCommand()
	ours := map[string]bool{"version": true}
	for _, c := range llmctl.Commands() {
		ours[c.Name] = true
	}
	checked := 0
	for _, top := range root.Commands() {
		if !ours[top.Name()] || top.Hidden {
			continue
		}
		walkAll(top, func(cmd *cobra.Command) {
			if !cmd.Runnable() || cmd.Hidden {
				return
			}
			checked++
			if strings.TrimSpace(cmd.Example) == "" {
				t.Errorf("%q has no Example", cmd.CommandPath())
				return
			}
			for _, line := range strings.Split(cmd.Example, "\n") {
				checkExample(t, root, cmd, line)
			}
		})
	}
	if checked < 60 {
		t.Errorf("checked %d commands, want every one of ctl and mirror (over 60)", checked)
	}
}

// checkExample parses one "$ llmgw …" line of cmd's examples as llmgw
// would: it must reach cmd (a group's, one of its commands) and its
// flags must parse.
func checkExample(t *testing.T, root, cmd *cobra.Command, line string) {
	t.Helper()
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "$ ")
	if !ok {
		return // the output an example shows
	}
	words := shellWords(rest)
	for len(words) > 0 && strings.Contains(words[0], "=") {
		words = words[1:] // VAR=value before the command
	}
	if len(words) == 0 || words[0] != "llmgw" {
		t.Errorf("%q: example %q does not run llmgw", cmd.CommandPath(), line)
		return
	}
	found, args, err := root.Find(words[1:])
	if err != nil || !under(found, cmd) {
		t.Errorf("%q: example %q runs %q (%v)", cmd.CommandPath(), line, found.CommandPath(), err)
		return
	}
	if err := found.ParseFlags(args); err != nil {
		t.Errorf("%q: example %q: %v", cmd.CommandPath(), line, err)
	}
}

// shellWords splits a command line at spaces outside quotes.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	quote, in := rune(0), false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote, in = r, true
		case quote == 0 && r == ' ':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

func walkAll(cmd *cobra.Command, f func(*cobra.Command)) {
	f(cmd)
	for _, sub := range cmd.Commands() {
		walkAll(sub, f)
	}
}

// under says whether cmd is group or one of its descendants.
func under(cmd, group *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c == group {
			return true
		}
	}
	return false
}
