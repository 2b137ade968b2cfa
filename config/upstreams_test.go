package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestUpstreams(t *testing.T) {
	c, err := Upstreams([]string{"gm1:4730", " gm2:4730 "}, []string{"bs1:11300"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range c.Backends {
		got = append(got, b.Name+"/"+b.Type+"/"+b.Address)
		if b.ID == 0 || b.DialTimeout != DefaultBackend().DialTimeout {
			t.Errorf("backend %+v", b)
		}
	}
	want := []string{"gearman-1/gearman/gm1:4730", "gearman-2/gearman/gm2:4730", "beanstalk-1/beanstalk/bs1:11300"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("backends = %v, want %v", got, want)
	}
	if ids := []int{c.Backends[0].ID, c.Backends[1].ID, c.Backends[2].ID}; !reflect.DeepEqual(ids, []int{1, 2, 513}) {
		t.Errorf("ids = %v", ids)
	}
	wantPools := []Pool{
		{Name: UpstreamGearmanPool, Strategy: StrategyShard, Backends: []string{"gearman-1", "gearman-2"}},
		{Name: UpstreamBeanstalkPool, Strategy: StrategyShard, Backends: []string{"beanstalk-1"}},
	}
	if !reflect.DeepEqual(c.Pools, wantPools) {
		t.Errorf("pools = %+v", c.Pools)
	}
	if c.Routes.GearmanDefault != UpstreamGearmanPool || c.Routes.BeanstalkDefault != UpstreamBeanstalkPool || len(c.Routes.Gearman) != 0 {
		t.Errorf("routes = %+v", c.Routes)
	}
	// Everything else is the default.
	d := Default()
	c.Backends, c.Pools, c.Routes, c.src = nil, nil, d.Routes, nil
	if !reflect.DeepEqual(c, d) {
		t.Errorf("Upstreams changed more than routing: %+v", c)
	}

	// One protocol only: the other stays local.
	c, err = Upstreams(nil, []string{"bs1:11300"})
	if err != nil || c.Routes.GearmanDefault != LocalName || c.Backends[0].ID != 513 {
		t.Errorf("beanstalk only: %v %+v", err, c)
	}
	if c, err := Upstreams(nil, nil); err != nil || len(c.Backends) != 0 {
		t.Errorf("no upstreams: %v %+v", err, c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// Upstreams leaves whole-config checks to Validate, after the other flags:
// here -gearman moves the listener away from the upstream's port.
func TestUpstreamsThenFlags(t *testing.T) {
	c, err := Upstreams([]string{"127.0.0.1:4730"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `command line: backends[0].address: "127.0.0.1:4730" is jobgate's own gearman.listen (":4730"): jobs would loop back to it`
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %s", err, want)
	}
	if err := c.Set("gearman.listen", ":4740"); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate after -gearman :4740: %v", err)
	}
}

func TestUpstreamsErrors(t *testing.T) {
	_, err := Upstreams([]string{"gm1", "gm2:4730", "", "gm2:4730"}, []string{"[::1]:11300", ":11300"})
	want := strings.Join([]string{
		`command line: -gearman-upstream: "gm1" is not host:port: missing port in address`,
		`command line: -gearman-upstream: required: the upstream's host:port`,
		`command line: -gearman-upstream: "gm2:4730" is listed twice (also server 2)`,
		`command line: -beanstalk-upstream: ":11300" has no host`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Upstreams error =\n%v\nwant\n%s", err, want)
	}
	many := make([]string, 512)
	for i := range many {
		many[i] = "h:" + strings.Repeat("1", 1+i%4)
	}
	if _, err := Upstreams(nil, many); err == nil || !strings.Contains(err.Error(), "512 servers: at most 511") {
		t.Errorf("too many: %v", err)
	}
}
