// Package routing is the pure core of the gateway: it decides which backend
// serves a Gearman function or a Beanstalk tube, and how the job ids and
// handles a client sees name the backend that holds the job. It opens no
// sockets and reads time only from an injected clock, so all of it is tested
// without a network.
//
// The pieces, in the order a request meets them:
//
//   - Rules (rules.go) map a name to a Pool: exact names, prefixes and
//     path.Match globs, tried in order, first match wins, with a default.
//   - A Pool (pool.go) maps a name to its Backends: one backend, a shard set
//     (rendezvous hashing of the name, hash.go) or a failover list. Owner is
//     the backend a producer uses; Order lists every backend, owner first,
//     for producer failover and consumer fan-in.
//   - A Backend (backend.go) is one server, local or upstream, with its
//     Breaker (breaker.go) and Health (health.go). The GearmanBackend and
//     BeanstalkBackend interfaces are what the proxy opens per client
//     session and per backend (DESIGN decision 2); routing/upstream
//     implements them over TCP, adapters over the local engines implement
//     them in process.
//   - IDMap (ids.go) and HandleMap (handles.go) encode the backend into
//     Beanstalk job ids and Gearman job handles, statelessly (DESIGN
//     decision 3), so any gateway with the same configuration decodes any
//     id.
//
// Everything here is immutable after construction except Breaker and Health,
// whose state changes are synchronised internally; lookups take no locks and
// allocate nothing.
//
// routing must not import proxy or config: cmd builds these values from the
// configuration, so that the configuration format and the routing core can
// change independently.
package routing
