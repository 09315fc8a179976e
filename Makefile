# Short names for the usual jobs; scripts/test.sh is what CI runs.
export PATH := /usr/local/go/bin:$(PATH)

build:
	go build -o bin/fpdedup ./cmd/fpdedup

test:
	bash scripts/test.sh

fuzz:
	go test -run XXX -fuzz FuzzOpen -fuzztime 60s ./fpstore
	go test -run XXX -fuzz FuzzChunkReader -fuzztime 30s ./ingest
	go test -run XXX -fuzz FuzzOpen -fuzztime 30s ./ingest

bench:
	go test -run XXX -bench . -benchmem ./fpstore ./ingest ./bench
	bash bench/foundation.sh

lint:
	gofmt -l $$(git ls-files '*.go')
	go vet ./...

generate:
	go generate ./schema

check-generated:
	bash scripts/test.sh

.PHONY: build test fuzz bench lint generate check-generated
