package main

import (
	"go/ast"
	"go/token"
	"sort"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// directive is a Caddyfile subdirective a parser takes, with the ones
// its block takes.
type directive struct {
	Name   string
	Module string // the guest module it sets up, when it names one
	Subs   []directive
}

// guestModules lists the registered modules a call such as
// caddy.GetModule("http.llm_guardrails.checks." + name) may load: a
// parser that sets up a module by its name.
func guestModules(call *ast.CallExpr) []string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "GetModule" || len(call.Args) != 1 {
		return nil
	}
	be, ok := call.Args[0].(*ast.BinaryExpr)
	if !ok || be.Op != token.ADD {
		return nil
	}
	lit, ok := be.X.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return nil
	}
	prefix, err := strconv.Unquote(lit.Value)
	if err != nil || !strings.HasSuffix(prefix, ".") {
		return nil
	}
	var out []string
	for _, id := range caddy.Modules() {
		if strings.HasPrefix(id, prefix) && !strings.Contains(id[len(prefix):], ".") {
			out = append(out, id)
		}
	}
	return out
}

// subdirectives derives the subdirectives a parser takes from its
// source: the string cases of its switches on the subdirective's name
// (`switch dir` in a caddyfileutil callback, or `switch d.Val()`), and
// those of the parsers each case calls, followed through the module's
// packages.
func (x *srcIndex) subdirectives(fr funcRef) []directive {
	return x.collect(fr, fr.decl.Body, map[*ast.FuncDecl]bool{fr.decl: true})
}

// collect finds the subdirectives parsed in node, a part of the
// function in.
func (x *srcIndex) collect(in funcRef, node ast.Node, seen map[*ast.FuncDecl]bool) []directive {
	var out []directive
	ast.Inspect(node, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BlockStmt:
			out = append(out, x.block(in, n.List, seen)...)
			return false
		case *ast.SwitchStmt:
			if !isDirectiveSwitch(n.Tag) {
				return true
			}
			out = append(out, x.cases(in, n, seen)...)
			return false
		case *ast.IndexExpr:
			if isDirectiveSwitch(n.Index) {
				for _, k := range x.mapKeys(in, n.X) {
					out = append(out, directive{Name: k})
				}
			}
		case *ast.CallExpr:
			for _, id := range guestModules(n) {
				out = append(out, directive{Name: id[strings.LastIndex(id, ".")+1:], Module: id})
			}
			if fr := x.resolve(in, n); fr != nil && !seen[fr.decl] {
				seen[fr.decl] = true
				out = append(out, x.collect(*fr, fr.decl.Body, seen)...)
				delete(seen, fr.decl)
			}
		}
		return true
	})
	return merge(out)
}

// mapKeys lists the string keys of a map literal that a variable (of
// the function, else of its package) holds: the table of subdirectives
// a parser looks its name up in.
func (x *srcIndex) mapKeys(in funcRef, e ast.Expr) []string {
	id, ok := e.(*ast.Ident)
	if !ok {
		return nil
	}
	var lit *ast.CompositeLit
	find := func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if li, ok := l.(*ast.Ident); ok && li.Name == id.Name && i < len(n.Rhs) {
					lit, _ = n.Rhs[i].(*ast.CompositeLit)
				}
			}
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if name.Name == id.Name && i < len(n.Values) {
					lit, _ = n.Values[i].(*ast.CompositeLit)
				}
			}
		}
		return lit == nil
	}
	ast.Inspect(in.decl.Body, find)
	for _, f := range in.pkg.files {
		for _, decl := range f.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.VAR && lit == nil {
				ast.Inspect(gd, find)
			}
		}
	}
	return stringKeys(lit)
}

func stringKeys(lit *ast.CompositeLit) []string {
	if lit == nil {
		return nil
	}
	if _, ok := lit.Type.(*ast.MapType); !ok {
		return nil
	}
	var out []string
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if bl, ok := kv.Key.(*ast.BasicLit); ok && bl.Kind == token.STRING {
			if k, err := strconv.Unquote(bl.Value); err == nil {
				out = append(out, k)
			}
		}
	}
	return out
}

// block collects a statement list's subdirectives, taking the tests of
// the subdirective's name too: `if dir == "x" { … }` parses x in its
// body, `if dir != "x" { return … }` parses x in the statements after it.
func (x *srcIndex) block(in funcRef, list []ast.Stmt, seen map[*ast.FuncDecl]bool) []directive {
	var out []directive
	for i, s := range list {
		ifs, ok := s.(*ast.IfStmt)
		name, op := "", ""
		if ok {
			name, op = dirTest(ifs.Cond)
		}
		switch op {
		case "==":
			out = append(out, directive{Name: name, Subs: x.collect(in, ifs.Body, seen)})
			if ifs.Else != nil {
				out = append(out, x.collect(in, ifs.Else, seen)...)
			}
		case "!=":
			if returns(ifs.Body) {
				return append(out, directive{Name: name, Subs: x.block(in, list[i+1:], seen)})
			}
			out = append(out, x.collect(in, s, seen)...)
		default:
			out = append(out, x.collect(in, s, seen)...)
		}
	}
	return merge(out)
}

func returns(b *ast.BlockStmt) bool {
	if len(b.List) == 0 {
		return false
	}
	_, ok := b.List[len(b.List)-1].(*ast.ReturnStmt)
	return ok
}

// dirTest reads `dir == "x"` and `dir != "x"` (not d.Val(), which a
// parser compares with its own directive's name too).
func dirTest(cond ast.Expr) (name, op string) {
	be, ok := cond.(*ast.BinaryExpr)
	if !ok || (be.Op != token.EQL && be.Op != token.NEQ) {
		return "", ""
	}
	if id, ok := be.X.(*ast.Ident); !ok || id.Name != "dir" { // d.Val() may be the directive's own name
		return "", ""
	}
	lit, ok := be.Y.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", ""
	}
	name, err := strconv.Unquote(lit.Value)
	if err != nil {
		return "", ""
	}
	return name, be.Op.String()
}

func (x *srcIndex) cases(in funcRef, sw *ast.SwitchStmt, seen map[*ast.FuncDecl]bool) []directive {
	var out []directive
	for _, stmt := range sw.Body.List {
		cc := stmt.(*ast.CaseClause)
		names := caseNames(cc)
		var subs []directive
		for _, sub := range x.block(in, cc.Body, seen) {
			if names[sub.Name] { // the same name switched on again
				subs = append(subs, sub.Subs...)
				continue
			}
			subs = append(subs, sub)
		}
		if cc.List == nil { // default: what it parses is at this level
			out = append(out, subs...)
		}
		for name := range names {
			out = append(out, directive{Name: name, Subs: merge(subs)})
		}
	}
	return out
}

func caseNames(cc *ast.CaseClause) map[string]bool {
	names := map[string]bool{}
	for _, e := range cc.List {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			continue
		}
		if name, err := strconv.Unquote(lit.Value); err == nil {
			names[name] = true
		}
	}
	return names
}

// isDirectiveSwitch tells a switch on a subdirective's name: `dir` (the
// argument of caddyfileutil's callbacks) or `d.Val()`.
func isDirectiveSwitch(tag ast.Expr) bool {
	switch t := tag.(type) {
	case *ast.Ident:
		return t.Name == "dir"
	case *ast.CallExpr:
		sel, ok := t.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Val" || len(t.Args) != 0 {
			return false
		}
		id, ok := sel.X.(*ast.Ident)
		return ok && id.Name == "d"
	}
	return false
}

// resolve finds the parser a call names, among the functions that take a
// *caddyfile.Dispenser: a method by its receiver's type (as far as
// typeOf can tell it), else by name, the caller's package first, then
// the package its qualifier names.
func (x *srcIndex) resolve(in funcRef, call *ast.CallExpr) *funcRef {
	var name, qual, recv string
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		name = fn.Name
	case *ast.SelectorExpr:
		name = fn.Sel.Name
		if id, ok := fn.X.(*ast.Ident); ok {
			qual = id.Name
		}
		recv = x.typeOf(in, fn.X)
	default:
		return nil
	}
	cands := x.funcs[name]
	pick := func(ok func(funcRef) bool) *funcRef {
		for i := range cands {
			if ok(cands[i]) {
				return &cands[i]
			}
		}
		return nil
	}
	if recv != "" {
		if fr := pick(func(c funcRef) bool { return c.recv == recv && c.pkg == in.pkg }); fr != nil {
			return fr
		}
		if fr := pick(func(c funcRef) bool { return c.recv == recv }); fr != nil {
			return fr
		}
	}
	if fr := pick(func(c funcRef) bool { return c.pkg == in.pkg && (recv == "" || c.recv == "") }); fr != nil {
		return fr
	}
	if fr := pick(func(c funcRef) bool { return qual != "" && strings.HasSuffix(c.pkg.path, "/"+qual) }); fr != nil {
		return fr
	}
	if len(cands) == 1 {
		return &cands[0]
	}
	return nil
}

// typeOf names the type of an expression a method is called on, as far
// as the source tells it without type checking: the receiver, a
// variable made by new(T), &T{} or T{}, or a field of a struct the
// module declares. "" when it cannot tell.
func (x *srcIndex) typeOf(in funcRef, e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		if in.decl.Recv != nil && len(in.decl.Recv.List[0].Names) == 1 && in.decl.Recv.List[0].Names[0].Name == e.Name {
			return in.recv
		}
		return localType(in.decl.Body, e.Name)
	case *ast.SelectorExpr:
		base := x.typeOf(in, e.X)
		if base == "" {
			return ""
		}
		for _, p := range x.pkgsInOrder(in.pkg) {
			if ts, ok := p.types[base]; ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					return fieldType(st, e.Sel.Name)
				}
			}
		}
	}
	return ""
}

// pkgsInOrder lists the packages read so far, p first.
func (x *srcIndex) pkgsInOrder(p *srcPkg) []*srcPkg {
	out := []*srcPkg{p}
	var paths []string
	for path := range x.pkgs {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	for _, path := range paths {
		if x.pkgs[path] != p {
			out = append(out, x.pkgs[path])
		}
	}
	return out
}

// localType finds the type a variable of a function body is made with.
func localType(body *ast.BlockStmt, name string) string {
	found := ""
	ast.Inspect(body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || found != "" {
			return found == ""
		}
		for i, l := range as.Lhs {
			if id, ok := l.(*ast.Ident); ok && id.Name == name && i < len(as.Rhs) {
				found = madeType(as.Rhs[i])
			}
		}
		return true
	})
	return found
}

// madeType is T of new(T), &T{} or T{}.
func madeType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.CallExpr:
		if id, ok := e.Fun.(*ast.Ident); ok && id.Name == "new" && len(e.Args) == 1 {
			return embeddedName(e.Args[0])
		}
	case *ast.UnaryExpr:
		return madeType(e.X)
	case *ast.CompositeLit:
		return embeddedName(e.Type)
	}
	return ""
}

// fieldType names the type of a struct's field (its element's, for a
// pointer, slice or map).
func fieldType(st *ast.StructType, name string) string {
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			if n.Name == name {
				return elemName(f.Type)
			}
		}
	}
	return ""
}

func elemName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.ArrayType:
		return elemName(t.Elt)
	case *ast.MapType:
		return elemName(t.Value)
	}
	return embeddedName(e)
}

// merge joins repeated names (a subdirective parsed in two places) and
// sorts them.
func merge(ds []directive) []directive {
	if len(ds) == 0 {
		return nil
	}
	byName := map[string]*directive{}
	var names []string
	for _, d := range ds {
		if have, ok := byName[d.Name]; ok {
			have.Subs = merge(append(have.Subs, d.Subs...))
			continue
		}
		d := d
		byName[d.Name] = &d
		names = append(names, d.Name)
	}
	sort.Strings(names)
	out := make([]directive, 0, len(names))
	for _, n := range names {
		out = append(out, *byName[n])
	}
	return out
}

// syntaxBlock finds the syntax block a package's doc comments give for a
// directive: an indented block whose first line starts with its name.
// The parser's own doc comment is looked at first.
func (x *srcIndex) syntaxBlock(p *srcPkg, first *ast.FuncDecl, name string) string {
	if first != nil {
		if b := blockFor(first.Doc.Text(), name); b != "" {
			return b
		}
	}
	for _, f := range p.files {
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok {
				if b := blockFor(fd.Doc.Text(), name); b != "" {
					return b
				}
			}
		}
	}
	return ""
}

// blockFor cuts the indented block of a doc comment whose first line
// starts with name.
func blockFor(doc, name string) string {
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "\t") {
			continue
		}
		j := i
		for j < len(lines) && (strings.HasPrefix(lines[j], "\t") || strings.TrimSpace(lines[j]) == "" && j+1 < len(lines) && strings.HasPrefix(lines[j+1], "\t")) {
			j++
		}
		block := lines[i:j]
		if f := strings.Fields(block[0]); len(f) > 0 && f[0] == name {
			for k := range block {
				block[k] = strings.TrimPrefix(block[k], "\t")
			}
			return strings.Join(block, "\n")
		}
		i = j
	}
	return ""
}
