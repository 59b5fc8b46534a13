package setup

import (
	"fmt"
	"io"
	"strings"
)

// lineDiff writes the changes from old to new line by line, as a unified
// diff does: "-" for a line that goes, "+" for one that comes, two lines
// of context around each change. mask hides values (NAME=…).
func lineDiff(w io.Writer, old, new string, mask bool) {
	a, b := splitLines(old), splitLines(new)
	ops := diffOps(a, b)
	const context = 2
	show := make([]bool, len(ops))
	for i, op := range ops {
		if op.kind != ' ' {
			for j := max(0, i-context); j <= min(len(ops)-1, i+context); j++ {
				show[j] = true
			}
		}
	}
	skipped := false
	for i, op := range ops {
		if !show[i] {
			skipped = true
			continue
		}
		if skipped {
			fmt.Fprintln(w, "  …")
			skipped = false
		}
		line := op.line
		if mask {
			line = maskValue(line)
		}
		fmt.Fprintf(w, "%c %s\n", op.kind, line)
	}
	if skipped {
		fmt.Fprintln(w, "  …")
	}
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// maskValue hides the value of a NAME=value line.
func maskValue(l string) string {
	if name, _, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") && !strings.ContainsAny(name, " \t") {
		return name + "=… (hidden)"
	}
	return l
}

type diffOp struct {
	kind byte // ' ', '-' or '+'
	line string
}

// diffOps is the shortest edit from a to b by their longest common
// subsequence (files setup writes are a few hundred lines at most).
func diffOps(a, b []string) []diffOp {
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i]})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, diffOp{'-', a[i]})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j]})
			j++
		}
	}
	return ops
}
