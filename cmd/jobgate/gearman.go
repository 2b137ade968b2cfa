package main

import (
	"errors"
	"flag"
	"log/slog"
)

// gearmanFlags holds the Gearman server's flags.
type gearmanFlags struct{}

func (f *gearmanFlags) register(fs *flag.FlagSet) {}

func (f *gearmanFlags) newServer(log *slog.Logger) (protocolServer, error) {
	return nil, errors.New("the Gearman engine is not built yet; disable it with -gearman=''")
}
