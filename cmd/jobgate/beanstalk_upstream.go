package main

import (
	"fmt"
	"strings"

	"github.com/jobgate/jobgate/config"
)

// applyBeanstalkUpstream is -beanstalk-upstream, the one-line gateway:
// every Beanstalk tube goes to the beanstalkd servers listed
// (comma-separated), sharded by name. It goes with -gearman-upstream (run
// after it) but not with Beanstalk routing from a config file.
func applyBeanstalkUpstream(cfg *config.Config, list string) error {
	declared := len(cfg.Routes.Beanstalk) > 0 || cfg.Routes.BeanstalkDefault != config.LocalName
	for _, b := range cfg.Backends {
		declared = declared || b.Type == config.TypeBeanstalk
	}
	for _, p := range cfg.Pools {
		declared = declared || p.Name == config.UpstreamBeanstalkPool
	}
	if declared {
		return fmt.Errorf("-beanstalk-upstream: the config file already declares Beanstalk backends or routes; use one or the other")
	}
	up, err := config.Upstreams(nil, strings.Split(list, ","))
	if err != nil {
		return err
	}
	cfg.Backends = append(cfg.Backends, up.Backends...)
	cfg.Pools = append(cfg.Pools, up.Pools...)
	cfg.Routes.BeanstalkDefault = up.Routes.BeanstalkDefault
	return nil
}
