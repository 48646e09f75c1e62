SHELL := /bin/bash
GO ?= go
TOOLS := $(CURDIR)/tools
export PATH := $(TOOLS):$(PATH)
export COMPACTORD_TOOLS := $(TOOLS)
VERSITYGW_VERSION := v1.8.0
PROTOC_GEN_GO_VERSION := v1.36.12
TEST_FLAGS ?= -count=1 -timeout 20m
BIN := bin/compactord

.PHONY: build test proto lint bench run tools clean

build:
	$(GO) build -ldflags "-X github.com/compactord/compactord/internal/cli.Version=$$(git describe --always --dirty 2>/dev/null || echo dev)" -o $(BIN) ./cmd/compactord

# Everything the tests need, installed into ./tools.
tools: $(TOOLS)/versitygw bench/node_modules/@duckdb/node-api

bench/node_modules/@duckdb/node-api: bench/package.json bench/package-lock.json
	cd bench && npm ci --no-audit --no-fund

$(TOOLS)/versitygw:
	GOBIN=$(TOOLS) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

test: tools
	$(GO) mod download
	$(GO) vet ./...
	$(GO) test $(TEST_FLAGS) ./...

proto: $(TOOLS)/protoc-gen-go
	protoc --proto_path=proto --go_out=. --go_opt=module=github.com/compactord/compactord proto/compactord/v1/compactord.proto

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench:
	./scripts/bench.sh

run: build
	./scripts/demo.sh

clean:
	rm -rf bin var
