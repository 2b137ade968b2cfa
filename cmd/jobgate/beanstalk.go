package main

import (
	"errors"
	"flag"
	"log/slog"
)

// beanstalkFlags holds the Beanstalk server's flags.
type beanstalkFlags struct{}

func (f *beanstalkFlags) register(fs *flag.FlagSet) {}

func (f *beanstalkFlags) newServer(log *slog.Logger) (protocolServer, error) {
	return nil, errors.New("the Beanstalk engine is not built yet; disable it with -beanstalk=''")
}
