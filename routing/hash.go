package routing

import "github.com/cespare/xxhash/v2"

// The shard hash. It decides which backend owns every function and tube, on
// every gateway instance and across restarts and upgrades, so it must never
// change: TestHashGolden pins it. xxhash64 is stable by specification (no
// per-process seed, unlike hash/maphash) and hashes a short name in a few
// nanoseconds without allocating.

// nameHash hashes a function or tube name, once per lookup.
func nameHash(name []byte) uint64 { return xxhash.Sum64(name) }

// backendKey is the per-backend constant that rendezvous hashing combines
// with the name hash. It derives from the backend's configured id, not its
// address or name, so an upstream can move to a new host without its names
// moving.
func backendKey(id int) uint64 {
	var b [8]byte
	for i := range b {
		b[i] = byte(uint64(id) >> (8 * i))
	}
	return xxhash.Sum64(b[:])
}

// score is the rendezvous (highest random weight) score of a name for a
// backend: the name goes to the backend with the highest score. Mixing the
// xor of the two hashes through a full-avalanche finaliser (splitmix64's)
// gives every (name, backend) pair an independent-looking score for one
// multiply-xorshift chain instead of a second pass over the name; the same
// construction as dgryski/go-rendezvous.
func score(name, key uint64) uint64 {
	x := name ^ key
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
