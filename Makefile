# The two commands of the README, plus conveniences.
.PHONY: run test build bench fuzz

run:
	go run ./cmd/jobgate

test:
	./scripts/test.sh

build:
	go build -o bin/jobgate ./cmd/jobgate
	go build -o bin/jobgate-bench ./cmd/jobgate-bench

bench:
	go test -run '^$$' -bench . -benchmem ./codec/... ./jobserver/...

# fuzz runs every fuzz target in the module for FUZZTIME each.
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh
