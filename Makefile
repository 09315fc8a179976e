# Short names for the usual jobs; scripts/test.sh is what CI runs.
export PATH := /usr/local/go/bin:$(PATH)

# Static (CGO_ENABLED=0): nothing of fpdedup needs cgo, and without the
# dynamic loader and libc's threads every run starts sooner (README).
build:
	CGO_ENABLED=0 go build -o bin/fpdedup ./cmd/fpdedup

test:
	bash scripts/test.sh

# Every fuzz target from its committed corpus: a few seconds each (~2 min),
# or FUZZTIME each (default 1h). scripts/fuzz.sh prints a table of execs.
fuzz:
	bash scripts/fuzz.sh short

fuzz-long:
	bash scripts/fuzz.sh long $(FUZZTIME)

# The benchmark harness beside the product it measures (bin/fpdedup-bench
# --help; bench/*.sh are presets of it). Microbenchmarks are go test -bench.
bench: build
	go build -o bin/fpdedup-bench ./cmd/fpdedup-bench

lint:
	gofmt -l $$(git ls-files '*.go')
	go vet ./...

generate:
	go generate ./schema

check-generated:
	bash scripts/test.sh

.PHONY: build test fuzz fuzz-long bench lint generate check-generated
