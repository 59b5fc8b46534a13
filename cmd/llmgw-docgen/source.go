package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// modulePath is the Go module whose packages the reference reads.
const modulePath = "github.com/llmgw/llmgw"

// srcPkg is one package's source, parsed with its comments.
type srcPkg struct {
	path   string // import path
	files  []*ast.File
	types  map[string]*ast.TypeSpec
	tdocs  map[string]string // a type's doc comment
	fields map[string]map[string]string
}

// srcIndex reads the module's packages on demand.
type srcIndex struct {
	root string
	fset *token.FileSet
	pkgs map[string]*srcPkg
	// funcs holds the functions and methods that take a
	// *caddyfile.Dispenser, by name, over every package read.
	funcs map[string][]funcRef
}

type funcRef struct {
	pkg  *srcPkg
	recv string // the receiver's type name, "" for a function
	decl *ast.FuncDecl
}

func newSrcIndex(root string) *srcIndex {
	return &srcIndex{root: root, fset: token.NewFileSet(), pkgs: map[string]*srcPkg{}, funcs: map[string][]funcRef{}}
}

// pkg parses the package at an import path of the module (nil for a
// package outside it).
func (x *srcIndex) pkg(path string) (*srcPkg, error) {
	if p, ok := x.pkgs[path]; ok {
		return p, nil
	}
	rel, ok := strings.CutPrefix(path, modulePath)
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
		return nil, nil
	}
	dir := filepath.Join(x.root, filepath.FromSlash(rel))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the source of %s: %w", path, err)
	}
	p := &srcPkg{path: path, types: map[string]*ast.TypeSpec{}, tdocs: map[string]string{}, fields: map[string]map[string]string{}}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(x.fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", name, err)
		}
		p.files = append(p.files, f)
	}
	x.pkgs[path] = p
	p.index()
	x.indexFuncs(p)
	return p, nil
}

// index records the package's types, their doc comments and their
// fields' doc comments.
func (p *srcPkg) index() {
	for _, f := range p.files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				p.types[ts.Name.Name] = ts
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				p.tdocs[ts.Name.Name] = doc.Text()
				if st, ok := ts.Type.(*ast.StructType); ok {
					p.fields[ts.Name.Name] = fieldDocs(st)
				}
			}
		}
	}
}

func fieldDocs(st *ast.StructType) map[string]string {
	out := map[string]string{}
	for _, fld := range st.Fields.List {
		doc := fld.Doc.Text()
		if doc == "" {
			doc = fld.Comment.Text()
		}
		for _, n := range fld.Names {
			out[n.Name] = doc
		}
		if len(fld.Names) == 0 {
			out[embeddedName(fld.Type)] = doc
		}
	}
	return out
}

func embeddedName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return embeddedName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	}
	return ""
}

// indexFuncs records the package's functions that take a
// *caddyfile.Dispenser: the parsers of Caddyfile tokens.
func (x *srcIndex) indexFuncs(p *srcPkg) {
	for _, f := range p.files {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil || !takesDispenser(fd.Type) {
				continue
			}
			recv := ""
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				recv = embeddedName(fd.Recv.List[0].Type)
			}
			x.funcs[fd.Name.Name] = append(x.funcs[fd.Name.Name], funcRef{pkg: p, recv: recv, decl: fd})
		}
	}
}

func takesDispenser(ft *ast.FuncType) bool {
	for _, prm := range ft.Params.List {
		if star, ok := prm.Type.(*ast.StarExpr); ok {
			if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Dispenser" {
				return true
			}
		}
	}
	return false
}

// loadAll reads every package of the module below modules/, so that
// calls from one package's parser into another's resolve.
func (x *srcIndex) loadAll() error {
	var dirs []string
	err := filepath.WalkDir(filepath.Join(x.root, "modules"), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" || d.Name() == "assets" {
			return filepath.SkipDir
		}
		dirs = append(dirs, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		rel, _ := filepath.Rel(x.root, dir)
		if _, err := x.pkg(modulePath + "/" + filepath.ToSlash(rel)); err != nil {
			return err
		}
	}
	return nil
}

// method finds a method of a type in its package.
func (x *srcIndex) method(pkgPath, typ, name string) *funcRef {
	for _, fr := range x.funcs[name] {
		if fr.pkg.path == pkgPath && fr.recv == typ {
			return &fr
		}
	}
	return nil
}

// relDir is a package's directory relative to the repository's root.
func relDir(pkgPath string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkgPath, modulePath), "/")
	if rel == "" {
		return "."
	}
	return rel
}
