package setup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// prompter asks a person questions on a terminal, one line each; a
// wrong answer is said why and asked again, Enter takes the default.
type prompter struct {
	in  *bufio.Reader
	out io.Writer
}

// errInputEnded is a person's input ending (Ctrl-D) before setup asked all.
var errInputEnded = errors.New("the input ended before every question was answered; nothing was written")

// ask asks q, with def as the answer to Enter; check (nil: any) says
// what is wrong with an answer.
func (p *prompter) ask(q, def string, check func(string) error) (string, error) {
	for {
		if def != "" {
			fmt.Fprintf(p.out, "%s [%s]: ", q, def)
		} else {
			fmt.Fprintf(p.out, "%s: ", q)
		}
		line, err := p.in.ReadString('\n')
		if err != nil && line == "" {
			fmt.Fprintln(p.out)
			return "", errInputEnded
		}
		v := strings.TrimSpace(line)
		if v == "" {
			v = def
		}
		if check == nil {
			return v, nil
		}
		if cerr := check(v); cerr != nil {
			fmt.Fprintf(p.out, "  ! %v\n", cerr)
			continue
		}
		return v, nil
	}
}

// yes asks a yes-or-no question.
func (p *prompter) yes(q string, def bool) (bool, error) {
	d := "y/N"
	if def {
		d = "Y/n"
	}
	var out bool
	_, err := p.ask(q+" ("+d+")", "", func(v string) error {
		switch strings.ToLower(v) {
		case "":
			out = def
		case "y", "yes", "j", "ja":
			out = true
		case "n", "no", "nein":
			out = false
		default:
			return fmt.Errorf("%q is not an answer to this question: type y for yes or n for no (Enter: %s)", v, map[bool]string{true: "yes", false: "no"}[def])
		}
		return nil
	})
	return out, err
}

// section starts a part of the interview with its explanation.
func (p *prompter) section(title, text string) {
	fmt.Fprintf(p.out, "\n== %s ==\n%s\n", title, text)
}

// optional wraps a check so that an empty answer (none) passes.
func optional(check func(string) error) func(string) error {
	return func(v string) error {
		if v == "" || v == "none" {
			return nil
		}
		return check(v)
	}
}

// none reads "none" as no answer.
func none(v string) string {
	if v == "none" {
		return ""
	}
	return v
}
