package config_test

import (
	"fmt"

	"github.com/jobgate/jobgate/config"
)

// Flags win over the file: load it, apply the flags the user set, then
// validate again. Errors name where each value came from.
func Example() {
	c, err := config.Parse("jobgate.yaml", []byte(`
gearman:
  listen: ":4730"
beanstalk:
  max_job_size: 1MiB
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	// As if run with -beanstalk :4730 (only flags the user set, e.g. from
	// flag.Visit, are applied).
	if err := c.Set("beanstalk.listen", ":4730"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.IsSet("beanstalk.max_job_size"), c.Beanstalk.MaxJobSize)
	fmt.Println(c.Validate())
	// Output:
	// true 1MiB
	// command line: beanstalk.listen: ":4730" collides with gearman.listen (":4730")
}

func ExampleUpstreams() {
	c, err := config.Upstreams([]string{"gm1:4730", "gm2:4730"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, b := range c.Backends {
		fmt.Println(b.Name, b.ID, b.Address)
	}
	fmt.Println(c.Routes.GearmanDefault, c.Routes.BeanstalkDefault)
	// Output:
	// gearman-1 1 gm1:4730
	// gearman-2 2 gm2:4730
	// gearman-upstream local
}
