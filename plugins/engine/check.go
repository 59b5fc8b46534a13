package engine

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Errors from CheckOptions and CheckArgs name the engine and the option or
// flag; the caller adds the model.

// OptionNames lists the declared options, comma-separated, in order.
func (i Info) OptionNames() string {
	names := make([]string, len(i.Options))
	for n, o := range i.Options {
		names[n] = o.Name
	}
	return strings.Join(names, ", ")
}

// option returns the declared option that name is, or false.
func (i Info) option(name string) (Option, bool) {
	for _, o := range i.Options {
		if o.Name == name {
			return o, true
		}
		if p, fam := strings.CutSuffix(o.Name, "*"); fam && strings.HasPrefix(name, p) && len(name) > len(p) {
			return o, true
		}
	}
	return Option{}, false
}

// CheckOptions refuses an option the engine does not declare, a value
// not of the option's type, or a model without a required option. An
// engine that declares no options is not checked.
func (i Info) CheckOptions(opts map[string]string) error {
	if len(i.Options) == 0 {
		return nil
	}
	if err := i.checkRequired(opts); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		o, ok := i.option(k)
		if !ok {
			return fmt.Errorf("engine %s has no option %s; known options: %s", i.Type, quote(k), i.OptionNames())
		}
		if err := checkValue(o.Type, opts[k]); err != nil {
			return fmt.Errorf("engine %s option %s: %w", i.Type, k, err)
		}
	}
	return nil
}

// checkRequired refuses options without a required one (empty counts as
// missing).
func (i Info) checkRequired(opts map[string]string) error {
	for _, o := range i.Options {
		if !o.Required || strings.HasSuffix(o.Name, "*") || strings.TrimSpace(opts[o.Name]) != "" {
			continue
		}
		hint := ""
		if o.Example != "" {
			hint = ", such as " + o.Example
		}
		return fmt.Errorf("engine %s needs option %s%s; set it in the model's options (%s)", i.Type, o.Name, hint, o.Description)
	}
	return nil
}

// checkValue checks v against an option type. A value holding a
// placeholder ({env.X}) is left to the engine.
func checkValue(typ, v string) error {
	if strings.Contains(v, "{") {
		return nil
	}
	shown := bound(v)
	var err error
	switch typ {
	case TypeInteger:
		_, err = strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", shown)
		}
	case TypeNumber:
		_, err = strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", shown)
		}
	case TypeBool:
		_, err = strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q: use true or false", shown)
		}
	case TypeDuration:
		_, err = time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration; use a number with a unit, such as 250ms or 2s", shown)
		}
	}
	return nil
}

// CheckArgs refuses args that carry a reserved flag (engines serve only on
// loopback, on a port the engine chooses) or, when the engine lists its
// flags, a flag it does not have.
func (i Info) CheckArgs(args []string) error {
	for _, a := range args {
		if r := reserved(i.ReservedArgs, a); r != "" {
			return fmt.Errorf("engine %s: args must not set %s (%s): engine servers listen only on loopback, on a port llmgw chooses; remove it from args", i.Type, r, quote(a))
		}
	}
	if len(i.ArgFlags) == 0 {
		return nil
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" || isNumber(a) {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if !slices.Contains(i.ArgFlags, name) {
			return fmt.Errorf("engine %s has no flag %s; its flags are %s", i.Type, bound(name), strings.Join(i.ArgFlags, ", "))
		}
	}
	return nil
}

// reserved returns the reserved flag that arg sets, or "".
func reserved(flags []string, arg string) string {
	name, _, _ := strings.Cut(arg, "=")
	for _, r := range flags {
		switch {
		case name == r:
			return r
		case strings.HasPrefix(r, "--") && strings.HasPrefix(name, "--") && len(name) > 2 && strings.HasPrefix(r, name):
			return r // an abbreviation argparse would accept
		case len(r) == 2 && r[0] == '-' && r[1] != '-' && strings.HasPrefix(arg, r):
			return r // a short flag with its value attached: -p8080
		}
	}
	return ""
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// quote quotes a value from a config or a request for an error, keeping
// at most 64 bytes of it.
func quote(s string) string { return strconv.Quote(bound(s)) }

// bound cuts s to 64 bytes, saying how much it left out.
func bound(s string) string {
	const keep = 64
	if len(s) <= keep {
		return s
	}
	return s[:keep] + fmt.Sprintf("… (%d bytes more)", len(s)-keep)
}
