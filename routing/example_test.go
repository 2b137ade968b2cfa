package routing_test

import (
	"fmt"

	"github.com/jobgate/jobgate/routing"
)

// Build a Beanstalk routing table the way cmd does from the configuration:
// "mail.*" tubes sharded over two upstreams, everything else local.
func Example() {
	local := &routing.Backend{ID: routing.LocalID, Name: "local"}
	b1 := &routing.Backend{ID: 1, Name: "beanstalk-1"}
	b2 := &routing.Backend{ID: 2, Name: "beanstalk-2"}

	mail, _ := routing.NewPool("mail", routing.Shard, b1, b2)
	def, _ := routing.NewPool("local", routing.Single, local)
	rules, _ := routing.NewRules([]routing.Rule{{Kind: routing.Prefix, Pattern: "mail.", Pool: mail}}, def)
	ids, _ := routing.NewIDMap([]*routing.Backend{local, b1, b2})

	// A put to "mail.welcome" goes to the owner of the name in its pool
	// (Pick: the owner, or the next in hash order while its breaker is
	// open).
	pool := rules.Match([]byte("mail.welcome"))
	owner := pool.Pick([]byte("mail.welcome"))

	// The upstream answers INSERTED 42; the client sees an id that names
	// the backend, and any gateway with this configuration decodes it.
	id, _ := ids.Encode(owner, 42)
	back, upstreamID := ids.Decode(id)
	fmt.Println(pool.Name(), back == owner, upstreamID)

	// Local jobs keep their ids.
	id, _ = ids.Encode(local, 42)
	fmt.Println(rules.Match([]byte("reports")).Name(), id)
	// Output:
	// mail true 42
	// local 42
}
