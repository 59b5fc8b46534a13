package main

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/caddyserver/caddy/v2"

	_ "github.com/llmgw/llmgw" // registers every llmgw module
)

// refDir is where the reference goes, relative to the repository's root.
const refDir = "docs/reference"

// module is one registered llmgw module, as the reference shows it.
type module struct {
	ID        string
	Type      reflect.Type
	Doc       string
	Fields    []field
	Directive string // the Caddyfile name that sets it up, "" for none
	Syntax    string
	Subs      []directive
	InlineKey string // the key naming it in its host's JSON
}

// llmgwModules lists the registered modules whose Go type is llmgw's,
// by ID.
func llmgwModules() []caddy.ModuleInfo {
	var out []caddy.ModuleInfo
	for _, id := range caddy.Modules() {
		info, err := caddy.GetModule(id)
		if err != nil {
			continue
		}
		if strings.HasPrefix(moduleType(info).PkgPath(), modulePath+"/") {
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func moduleType(info caddy.ModuleInfo) reflect.Type {
	t := reflect.TypeOf(info.New())
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// generate makes the reference: file name (in refDir) → content.
func generate(root string) (map[string][]byte, error) {
	x := newSrcIndex(root)
	if err := x.loadAll(); err != nil {
		return nil, err
	}
	var mods []*module
	keys := map[string]string{} // namespace → inline key
	for _, info := range llmgwModules() {
		m, err := x.describe(info)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", info.ID, err)
		}
		collectInlineKeys(m.Type, keys, map[reflect.Type]bool{})
		mods = append(mods, m)
	}
	out := map[string][]byte{}
	for _, m := range mods {
		m.InlineKey = keys[namespaceOf(m.ID)]
		out[pageName(m.ID)] = renderModule(m)
	}
	out["config.md"] = renderIndex(mods)
	return out, nil
}

// describe reads a module's fields, doc comment and Caddyfile parser.
func (x *srcIndex) describe(info caddy.ModuleInfo) (*module, error) {
	t := moduleType(info)
	m := &module{ID: string(info.ID), Type: t}
	p, err := x.pkg(t.PkgPath())
	if err != nil {
		return nil, err
	}
	m.Doc = p.tdocs[t.Name()]
	if t.Kind() == reflect.Struct {
		if err := x.fields(t, "", map[reflect.Type]bool{t: true}, &m.Fields); err != nil {
			return nil, err
		}
	}
	fr := x.method(t.PkgPath(), t.Name(), "UnmarshalCaddyfile")
	if fr == nil {
		return m, nil
	}
	m.Directive = directiveName(m.ID)
	m.Syntax = x.syntaxBlock(p, fr.decl, m.Directive)
	m.Subs = x.subdirectives(*fr)
	return m, nil
}

// directiveName is the Caddyfile name of a module: the handler's
// directive, the app's global option, a guest module's name in its
// host's block.
func directiveName(id string) string {
	if name, ok := strings.CutPrefix(id, "http.handlers."); ok {
		return name
	}
	return id[strings.LastIndex(id, ".")+1:]
}

func namespaceOf(id string) string {
	if i := strings.LastIndex(id, "."); i >= 0 {
		return id[:i]
	}
	return ""
}

// hostOf is the handler a guest module's namespace belongs to:
// http.llm_router.policies → http.handlers.llm_router.
func hostOf(id string) string {
	parts := strings.Split(id, ".")
	if len(parts) >= 4 && parts[0] == "http" && strings.HasPrefix(parts[1], "llm_") {
		return "http.handlers." + parts[1]
	}
	return ""
}

// collectInlineKeys finds, in a module's config, the `caddy` tags that
// name a namespace and the JSON key that picks its module.
func collectInlineKeys(t reflect.Type, keys map[string]string, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || !strings.HasPrefix(t.PkgPath(), modulePath) {
		return
	}
	seen[t] = true
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if ns := caddyNamespace(f.Tag); ns != "" {
			for _, part := range strings.Fields(f.Tag.Get("caddy")) {
				if k, ok := strings.CutPrefix(part, "inline_key="); ok {
					keys[ns] = k
				}
			}
		}
		collectInlineKeys(f.Type, keys, seen)
	}
}

func pageName(id string) string { return id + ".md" }

// mdCell makes text safe in a Markdown table's cell.
func mdCell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

func writeSubs(b *bytes.Buffer, ds []directive, depth int) {
	for _, d := range ds {
		fmt.Fprintf(b, "%s- `%s`", strings.Repeat("  ", depth), d.Name)
		if d.Module != "" {
			fmt.Fprintf(b, ": the module [`%s`](%s)", d.Module, pageName(d.Module))
		}
		b.WriteString("\n")
		writeSubs(b, d.Subs, depth+1)
	}
}
