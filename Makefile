SHELL := /bin/bash
GO ?= go
TOOLS := $(CURDIR)/tools
export PATH := $(TOOLS):$(PATH)
export COMPACTORD_TOOLS := $(TOOLS)
VERSITYGW_VERSION := v1.8.0
FAKE_GCS_SERVER_VERSION := v1.56.1
PROTOC_GEN_GO_VERSION := v1.36.12
TEST_FLAGS ?= -count=1 -timeout 20m
BIN := bin/compactord

.PHONY: build test check proto lint bench run demo-cli tools clean

build:
	$(GO) build -ldflags "-X github.com/compactord/compactord/internal/cli.Version=$$(git describe --always --dirty 2>/dev/null || echo dev)" -o $(BIN) ./cmd/compactord

# Everything the tests need, installed into ./tools.
tools: $(TOOLS)/versitygw $(TOOLS)/fake-gcs-server

$(TOOLS)/versitygw:
	GOBIN=$(TOOLS) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

# The Cloud Storage emulator the gs:// tests start (internal/testing/gcsserver).
$(TOOLS)/fake-gcs-server:
	GOBIN=$(TOOLS) $(GO) install github.com/fsouza/fake-gcs-server@$(FAKE_GCS_SERVER_VERSION)

$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

test: tools check
	$(GO) mod download
	$(GO) vet ./...
	$(GO) test $(TEST_FLAGS) ./...

# Package boundaries (internal/testing/layout): no product package imports
# a test harness, the scheduler and the clock know no table format, the
# daemon does not link the demo writer, storage holds no fault injection.
check:
	GO=$(GO) $(GO) run ./internal/testing/layout/checklayout

# Every .proto under proto/ (compactord's own records, records.proto, and
# our Lance definitions); the generated Go is committed. The Lance files
# import protobuf's well-known types (google/protobuf/*.proto), which
# Debian's protobuf-compiler does not ship (libprotobuf-dev does, under
# /usr/include): PROTO_INCLUDE names their directory. compactord's own
# records import none, so `make proto-records` needs no include path.
PROTO_INCLUDE ?= /usr/include
PROTOC_GEN := protoc --proto_path=proto --plugin=protoc-gen-go=$(TOOLS)/protoc-gen-go --go_out=. --go_opt=module=github.com/compactord/compactord
.PHONY: proto-records
proto: proto-records
	@test -f $(PROTO_INCLUDE)/google/protobuf/empty.proto || { echo "protoc needs protobuf's well-known types: install libprotobuf-dev or set PROTO_INCLUDE to the directory holding google/protobuf/*.proto"; exit 1; }
	$(PROTOC_GEN) --proto_path=$(PROTO_INCLUDE) $$(find proto/lance -name '*.proto' | sort)

proto-records: $(TOOLS)/protoc-gen-go
	$(PROTOC_GEN) $$(find proto/compactord -name '*.proto' | sort)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The Lance benchmarks, LanceDB the peer of every figure (scripts/bench.sh).
bench: lancedb
	./scripts/bench.sh

# Lance MemWAL merge vs LanceDB's plain mergeInsert (docs/benchmarks.md,
# "Lance: MemWAL merge"): 1 M upserts into 10 M rows by default;
# LANCE_BENCH_ROWS, LANCE_BENCH_UPSERTS, LANCE_BENCH_TRIALS scale it.
.PHONY: bench-lance-merge
bench-lance-merge: lancedb
	LANCE_BENCH=1 $(GO) test -count=1 -timeout 60m -run '^TestBenchMemWALMerge$$' -v ./internal/merge

.PHONY: bench-lance-compact
bench-lance-compact: lancedb
	LANCE_BENCH=1 $(GO) test -count=1 -timeout 60m -run '^TestBenchCompaction$$' -v ./internal/compact

# Vector index catch-up and remap vs LanceDB's optimize() (docs/benchmarks.md,
# "Lance: vector indexes"); LANCE_BENCH_ROWS, LANCE_BENCH_NEW, LANCE_BENCH_DIR
# (the tables are built once there), LANCE_BENCH_TRIALS scale it.
.PHONY: bench-lance-vector
bench-lance-vector: lancedb
	LANCE_BENCH=1 $(GO) test -count=1 -timeout 180m -run '^TestBenchVectorIndex$$' -v ./internal/index

# The daemon with its demo workload on ./var/compactord-demo; status page on
# http://127.0.0.1:9464/. Ctrl-C drains and exits 0. scripts/demo.sh is the
# scripted CLI tour (make demo-cli).
run: build
	@mkdir -p var
	./$(BIN) run --config configs/demo.yaml

demo-cli: build
	./scripts/demo.sh

clean:
	rm -rf bin var

# ---- Deployment artifacts and integration servers (internal/testing/e2e) ----------

AZURITE_DIR := $(TOOLS)/azurite
AZURITE_SRC := internal/testing/e2e/testdata/azurite

.PHONY: azurite deploy-check

# Azurite, the Azure Blob Storage emulator the integration tests start, from
# npm into tools/azurite, pinned by its lockfile. 3.35.0 is the newest whose
# engines accept Node 20 (3.36 wants Node >= 21, 3.37 >= 22; the tests start
# it with --skipApiVersionCheck, so the azblob client's newer API version is
# served); package.json and the lock must name the same version.
AZURITE_VERSION := 3.35.0
azurite: $(AZURITE_DIR)/node_modules/.bin/azurite-blob

$(AZURITE_DIR)/node_modules/.bin/azurite-blob: $(AZURITE_SRC)/package.json $(AZURITE_SRC)/package-lock.json
	@grep -q '"azurite": "$(AZURITE_VERSION)"' $(AZURITE_SRC)/package.json || { echo "$(AZURITE_SRC)/package.json does not pin azurite $(AZURITE_VERSION) (AZURITE_VERSION in the Makefile)" >&2; exit 1; }
	mkdir -p $(AZURITE_DIR)
	cp $(AZURITE_SRC)/package.json $(AZURITE_SRC)/package-lock.json $(AZURITE_DIR)/
	cd $(AZURITE_DIR) && npm ci --no-audit --no-fund
	touch $@

# `make test` installs Azurite too: this line adds a prerequisite to the
# tools target above without changing its rule.
tools: azurite

# LanceDB 0.39.0, the test oracle for the Lance code (internal/testing/lancedb),
# from npm into tools/lancedb, pinned by its lockfile. npm ci refuses this lock
# (the registry does not serve the other platforms' builds to this one), so it
# is npm install with the optional packages (other platforms, embeddings) left
# out; the linux-x64-gnu build is a direct dependency and stays.
LANCEDB_DIR := $(TOOLS)/lancedb
LANCEDB_SRC := internal/testing/lancedb/node

.PHONY: lancedb
lancedb: $(LANCEDB_DIR)/node_modules/@lancedb/lancedb/package.json

$(LANCEDB_DIR)/node_modules/@lancedb/lancedb/package.json: $(LANCEDB_SRC)/package.json $(LANCEDB_SRC)/package-lock.json
	mkdir -p $(LANCEDB_DIR)
	cp $(LANCEDB_SRC)/package.json $(LANCEDB_SRC)/package-lock.json $(LANCEDB_DIR)/
	cd $(LANCEDB_DIR) && npm install --omit=optional --no-audit --no-fund
	touch $@

tools: lancedb

# The deployment artifacts alone, validated with the real tools (promtool,
# systemd-analyze, the Dockerfile's build, the daemon's /metrics).
deploy-check:
	$(GO) test $(TEST_FLAGS) -run 'Test(Systemd|Kubernetes|Prometheus|RuleIntervals|Runbooks|Grafana|MetricsExist|Docker|ExampleConfigs)' ./internal/testing/e2e

# Reliability soak (docs/reliability.md): the Lance campaigns, one after
# another, for DURATION in all: the Lance crash campaign (internal/testing/crash:
# SIGKILL in merge, index catch-up and trim, 10%), the Lance model test
# (internal/testing/model, 50%) and the Lance concurrency campaign
# (internal/testing/concurrency: LanceDB writers against two daemons and CLI
# jobs, 40%). The binaries are built first, so the run tests one build even
# if the tree changes meanwhile. The full log goes to SOAK_LOG; the summary
# sums operations, injected faults, crashes survived and violations, which
# must be 0.
DURATION ?= 30m
SOAK_DIR ?= var/soak
SOAK_LOG ?= $(SOAK_DIR)/soak.log
.PHONY: soak
soak: tools
	@mkdir -p $(SOAK_DIR) $(dir $(SOAK_LOG))
	$(GO) build -o $(SOAK_DIR)/compactord ./cmd/compactord
	@for p in crash model concurrency; do $(GO) test -c -o $(SOAK_DIR)/$$p.test ./internal/testing/$$p || exit 1; done
	@echo "soak for $(DURATION); log in $(SOAK_LOG)"
	@: > $(SOAK_LOG); status=0; \
	for p in crash model concurrency; do \
		(cd internal/testing/$$p && COMPACTORD_SOAK=$(DURATION) COMPACTORD_BINARY=$(abspath $(SOAK_DIR))/compactord \
			$(abspath $(SOAK_DIR))/$$p.test -test.v -test.count=1 -test.timeout=0 -test.run '^TestSoak') >> $(SOAK_LOG) 2>&1 || status=1; \
	done; \
	grep -E '^(SOAK |--- FAIL|FAIL|PASS)|violation:' $(SOAK_LOG); \
	awk '/^SOAK campaign=/ { for (i = 2; i <= NF; i++) { split($$i, kv, "="); n[kv[1]] += kv[2] } } \
		END { printf "SOAK total: operations=%d faults_injected=%d crashes_survived=%d races=%d violations=%d\n", \
			n["ops"], n["faults"], n["crashes"], n["races"], n["violations"] }' $(SOAK_LOG); \
	exit $$status
