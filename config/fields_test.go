package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestFields(t *testing.T) {
	fields := Fields()
	seen := map[string]bool{}
	for _, f := range fields {
		if seen[f] {
			t.Errorf("%s listed twice", f)
		}
		seen[f] = true
	}
	for _, f := range []string{
		"gearman.listen", "beanstalk.max_job_size", "data.fsync", "tls.acme.domains",
		"tls.certificates[]", "tls.certificates[].cert_file", "auth.rules[].produce",
		"tracing.sample_ratio", "tracing.command_spans", "backends[].breaker.half_open_requests",
		"pools[].backends", "routes.beanstalk[].glob", "routes.gearman_default", "shutdown_timeout",
	} {
		if !seen[f] {
			t.Errorf("Fields() lacks %s", f)
		}
	}
	// Every listed field can be found by path (with indices for lists).
	c := Default()
	c.TLS.Certificates = make([]CertKey, 1)
	c.Auth.Identities, c.Auth.Rules = make([]Identity, 1), make([]Rule, 1)
	c.Backends, c.Pools = make([]Backend, 1), make([]Pool, 1)
	c.Routes.Gearman, c.Routes.Beanstalk = make([]Route, 1), make([]Route, 1)
	for _, f := range fields {
		if _, err := fieldByPath(reflect.ValueOf(c).Elem(), strings.ReplaceAll(f, "[]", "[0]")); err != nil {
			t.Errorf("fieldByPath(%s): %v", f, err)
		}
	}
}

// TestDocumented checks that every exported identifier and every field of
// the file format has a doc comment: the README's field table is built
// from them.
func TestDocumented(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && d.Doc == nil {
					t.Errorf("%s: func %s has no doc comment", fset.Position(d.Pos()), d.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
							t.Errorf("%s: type %s has no doc comment", fset.Position(s.Pos()), s.Name)
						}
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fld := range st.Fields.List {
								if len(fld.Names) > 0 && fld.Names[0].IsExported() && fld.Doc == nil {
									t.Errorf("%s: field %s.%s has no doc comment", fset.Position(fld.Pos()), s.Name, fld.Names[0])
								}
							}
						}
					case *ast.ValueSpec:
						exported := slices.ContainsFunc(s.Names, func(n *ast.Ident) bool { return n.IsExported() })
						if exported && d.Doc == nil && s.Doc == nil {
							t.Errorf("%s: %s has no doc comment", fset.Position(s.Pos()), s.Names[0])
						}
					}
				}
			}
		}
	}
}

func TestFlagFields(t *testing.T) {
	known := map[string]bool{}
	for _, f := range Fields() {
		known[f] = true
	}
	for flag, path := range FlagFields() {
		if !known[path] {
			t.Errorf("flag -%s sets %s, which is not a field", flag, path)
		}
	}
}
