package upstream

import (
	"context"
	"fmt"

	"github.com/jobgate/jobgate/codec/gearman"
)

// GearmanAdminClientID is the client id (SET_CLIENT_ID) of the connections
// jobgate opens to a gearmand for its own use: admin commands (Admin) and
// health probes (Probe). gearmand lists every connection in "workers", so
// a gateway merging the upstreams' listings drops the lines with this id
// and no function: they are jobgate's, not its clients'. A client that
// sets this id itself is taken for one of them.
const GearmanAdminClientID = "jobgate.admin"

// adminTag is the SET_CLIENT_ID packet that starts those connections: a
// binary packet followed by a text command on one connection is handled in
// order by gearmand, so the id is set before the command runs.
var adminTag = gearman.AppendPacket(nil, gearman.Req, gearman.SetClientID, []byte(GearmanAdminClientID))

// enterAdmin waits until no other admin or probe connection of g is open,
// or ctx ends, and returns the function that lets the next one in. The
// error of a wait that ended is not a transport error: the server did
// nothing wrong (the connection it waited on counts if it did). One at
// a time per server: a connection gearmand has accepted but whose
// SET_CLIENT_ID it has not read yet is listed without the id, and would be
// taken for a client's by a concurrent "workers" of this process.
func (g *Gearman) enterAdmin(ctx context.Context) (leave func(), err error) {
	select {
	case g.admin <- struct{}{}:
		return func() { <-g.admin }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("upstream %s: waiting for the admin connection: %v", g.cfg.Addr, ctx.Err())
	}
}
