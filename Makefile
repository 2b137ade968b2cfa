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

# fuzz runs every fuzz target for FUZZTIME each.
FUZZTIME ?= 30s
fuzz:
	@for pkg in ./codec/gearman ./codec/beanstalk; do \
		for target in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			go test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done
