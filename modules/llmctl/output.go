package llmctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

// Output formats of --output (-o).
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// outputFlags puts --output (-o) and its alias --json on cmd for every
// subcommand, and checks the choice before a subcommand runs: *format
// becomes table, json or yaml, and *machine is set for json and yaml,
// where a command prints the answer instead of its table.
func outputFlags(cmd *cobra.Command, format *string, machine *bool) {
	cmd.PersistentFlags().StringVarP(format, "output", "o", formatTable, "how to print: table, json or yaml (field names as in the API's JSON)")
	cmd.PersistentFlags().BoolVar(machine, "json", false, "print JSON (the same as -o json)")
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if *machine {
			if cmd.Flags().Changed("output") && *format != formatJSON {
				return fmt.Errorf("--json and --output %s disagree; give one of them", *format)
			}
			*format = formatJSON
		}
		switch *format {
		case formatTable:
		case formatJSON, formatYAML:
			*machine = true
		default:
			return fmt.Errorf("--output %q is not a format; use table, json or yaml", *format)
		}
		return nil
	}
}

// emit writes a JSON answer in the chosen format: as it came for json,
// converted for yaml (so the field names are the JSON's).
func emit(w io.Writer, format string, raw []byte) error {
	if format != formatYAML {
		_, err := w.Write(raw)
		return err
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("converting the answer to YAML: it is not JSON: %w", err)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(yamlValue(v)); err != nil {
		return fmt.Errorf("writing YAML: %w", err)
	}
	return enc.Close()
}

// yamlValue turns json.Numbers into ints or floats, so YAML writes them
// as numbers, not strings.
func yamlValue(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, e := range v {
			v[k] = yamlValue(e)
		}
	case []any:
		for i, e := range v {
			v[i] = yamlValue(e)
		}
	}
	return v
}

// printValue writes v, marshalled as JSON, in the chosen format.
func printValue(w io.Writer, format string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the answer: %w", err)
	}
	return emit(w, format, append(raw, '\n'))
}
