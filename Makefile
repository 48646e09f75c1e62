SHELL := /bin/bash
GO ?= go
TOOLS := $(CURDIR)/tools
export PATH := $(TOOLS):$(PATH)
export COMPACTORD_TOOLS := $(TOOLS)

.PHONY: build test proto lint bench run tools clean

build:
	$(GO) build -o bin/compactord ./cmd/compactord

proto: $(TOOLS)/protoc-gen-go
	protoc --proto_path=proto --go_out=. --go_opt=module=github.com/compactord/compactord proto/compactord/v1/compactord.proto

$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
