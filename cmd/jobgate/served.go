package main

import (
	"fmt"
	"strings"

	"github.com/jobgate/jobgate/config"
)

// notServedYet are the config sections and fields of features this build
// does not run yet (TLS, auth, tracing, limits, routing to
// upstreams). A config that sets one to anything but its default is
// refused rather than silently ignored, so nobody believes they have, say,
// TLS when they do not; a file that spells out the defaults (like
// examples/config/default.yaml) still loads.
var notServedYet = []string{
	"gearman.tls_listen", "beanstalk.tls_listen", "admin.tls",
	"limits", "tls", "auth", "tracing",
}

const unserved = "not supported by this build yet; remove it (see the README's Configuration)"

// checkServed refuses a config that asks for a feature this build does not
// run yet.
func checkServed(cfg *config.Config) error {
	def := config.Default()
	var errs config.Errors
	for _, path := range config.Fields() {
		if !notServed(path) {
			continue
		}
		if list, isList := strings.CutSuffix(path, "[]"); isList && !strings.Contains(list, "[]") {
			// A list of sections (backends, pools, routes, ...): any
			// element asks for the feature.
			if sectionLists[list](cfg) > 0 {
				errs = append(errs, cfg.ErrorAt(list, unserved))
			}
			continue
		}
		if strings.Contains(path, "[]") {
			continue // inside a list element: covered by its list
		}
		got, err := cfg.Get(path)
		want, _ := def.Get(path)
		if err != nil || got != want {
			errs = append(errs, cfg.ErrorAt(path, unserved))
		}
	}
	// Gearman and Beanstalk upstreams are served; upstream TLS not yet.
	for i, b := range cfg.Backends {
		if b.TLS.Enabled {
			errs = append(errs, cfg.ErrorAt(fmt.Sprintf("backends[%d].tls.enabled", i), "upstream TLS is "+unserved))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

func notServed(path string) bool {
	for _, p := range notServedYet {
		if path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[") {
			return true
		}
	}
	return false
}

// sectionLists gives the length of each list of sections among the
// features not served yet.
var sectionLists = map[string]func(*config.Config) int{
	"tls.certificates": func(c *config.Config) int { return len(c.TLS.Certificates) },
	"auth.identities":  func(c *config.Config) int { return len(c.Auth.Identities) },
	"auth.rules":       func(c *config.Config) int { return len(c.Auth.Rules) },
}
