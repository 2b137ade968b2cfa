package config

import (
	"reflect"
)

// Fields returns the path of every field a config file can set, in
// declaration order: "gearman.listen", ..., "backends[].tls.ca_file", ...
// A list of sections is written "name[]" and its elements' fields follow it
// ("backends[]" then "backends[].name"); "routes.gearman[]" and
// "routes.beanstalk[]" have the same fields. Sections themselves are not
// listed, only the values inside them. It is the list the README must
// document.
func Fields() []string {
	var out []string
	listFields(reflect.TypeFor[Config](), "", &out)
	return out
}

func listFields(t reflect.Type, prefix string, out *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name := yamlName(f)
		if name == "" {
			continue
		}
		p := joinPath(prefix, name)
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct:
			listFields(ft, p, out)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			*out = append(*out, p+"[]")
			listFields(ft.Elem(), p+"[]", out)
		default:
			*out = append(*out, p)
		}
	}
}
