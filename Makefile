# pgbackoff — run `make` (or `make help`) for the list of targets.
.DEFAULT_GOAL := help
SHELL := bash
GO ?= go
PKGS := ./...
# The CLI is its own module (ADR 0042); go.work joins the two for
# development, and every target below also works with GOWORK=off.
CLI := cmd/backoffctl
BIN := bin/backoffctl
# Test modules (ADR 0086): they require Testcontainers, which the library's
# module must not; make test, vet, lint and tidy run them after the CLI.
TEST_MODULES := internal/containers internal/faulttest

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/backoffctl (the cmd/backoffctl module)
	$(GO) -C $(CLI) build -o $(CURDIR)/$(BIN) .

# The longest test packages, named first: go test runs packages in the
# order given (./... then adds the rest, each once), two at a time on two
# cores, and a long package started last ran alone for half a minute.
SLOW_PKGS := ./bench ./webui ./internal/sqltest/lifecycle ./internal/clienttest ./internal/sqltest/security
# SKIP_PKGS: the library's packages make test leaves out, as paths in the
# module (SKIP_PKGS=bench). CI's runs on the PostgreSQL versions other than
# the default leave out bench: its tests check the benchmark harness's code
# paths, which do not depend on the server's version, and the default run
# has them.
SKIP_PKGS ?=
MODULE := github.com/pgbackoff/pgbackoff
TEST_PKGS = $(if $(SKIP_PKGS),$(filter-out $(addprefix ./,$(SKIP_PKGS)),$(SLOW_PKGS)) $(filter-out $(addprefix $(MODULE)/,$(SKIP_PKGS)),$(shell $(GO) list $(PKGS))),$(if $(filter ./...,$(PKGS)),$(SLOW_PKGS)) $(PKGS))

# make test and make test-race print each package's closing line and the
# whole output of what failed; every test's output goes to $(TEST_LOG).
# V=1 prints it all as it comes (go test -v, without the RUN/PASS lines).
TEST_LOG ?= test-output.log
ifeq ($(V),1)
TEST_FLAGS := -v
TEST_FILTER := scripts/quiet-test-output
else
TEST_FLAGS := -json
TEST_FILTER := $(GO) run ./internal/testsummary -log $(TEST_LOG)
endif

# The library's and the CLI's packages share one server: the one
# TEST_DATABASE_URL or DATABASE_URL names; else, when Docker answers, a
# container that pgcontainer (internal/containers) starts with
# Testcontainers and gives them as TEST_DATABASE_URL (ADR 0088); else each
# package starts a local cluster. The test modules start their own servers
# (the fault tests restart and pause theirs). $(call LIBRARY_TESTS,FLAGS,PKGS)
PGCONTAINER := bin/pgcontainer
WITH_TEST_SERVER = $(GO) -C internal/containers build -o $(CURDIR)/$(PGCONTAINER) ./cmd/pgcontainer && $(PGCONTAINER) --
LIBRARY_TESTS = $(WITH_TEST_SERVER) bash -c 'rc=0; $(GO) test $(1) $(2) || rc=1; $(GO) -C $(CLI) test $(1) ./... || rc=1; exit $$rc'

.PHONY: test
test: ## Run every test against real PostgreSQL (TEST_DATABASE_URL, else a Docker container through Testcontainers, else a local cluster; it says which); V=1 prints every test's output
	set -o pipefail; { rc=0; $(call LIBRARY_TESTS,-count=1 $(TEST_FLAGS),$(TEST_PKGS)) || rc=1; for m in $(TEST_MODULES); do $(GO) -C $$m test -count=1 $(TEST_FLAGS) ./... || rc=1; done; exit $$rc; } 2>&1 | $(TEST_FILTER)

.PHONY: conformance
conformance: ## The cross-language conformance suite (conformance/): every scenario against the Go, Python and TypeScript workers, then the mixed run with kills (BACKOFF_MIXED_JOBS, default 2000)
	set -o pipefail; BACKOFF_CONFORMANCE=1 BACKOFF_CONFORMANCE_MIXED=1 $(GO) test -count=1 -v -timeout 10m ./internal/conformance 2>&1 | scripts/quiet-test-output

.PHONY: test-python-venv
test-python-venv: ## Install clients/python with pip into a fresh venv (offline: Debian's psycopg, setuptools and wheel) and run its pytest suite from the venv's python
	set -o pipefail; BACKOFF_PYTHON_VENV=1 $(GO) test -count=1 -v -run '^TestPythonPackageInVenv$$' ./internal/clienttest 2>&1 | scripts/quiet-test-output

.PHONY: test-serializable
test-serializable: ## The Go client's, Worker's and fault suites, the Python and TypeScript suites, the conformance scenarios and a mixed run of 600 jobs (BACKOFF_MIXED_JOBS), and the SQL lifecycle and schedule suites as a SQL-only worker that follows docs/concepts.md, in databases whose default_transaction_isolation is serializable (docs/adr/0080)
	set -o pipefail; { rc=0; BACKOFF_TEST_DEFAULT_ISOLATION=serializable $(GO) test -count=1 $(TEST_FLAGS) ./internal/sqltest/lifecycle ./internal/clienttest ./client/... || rc=1; BACKOFF_TEST_DEFAULT_ISOLATION=serializable $(GO) -C internal/faulttest test -count=1 $(TEST_FLAGS) ./... || rc=1; exit $$rc; } 2>&1 | $(TEST_FILTER)
	set -o pipefail; BACKOFF_TEST_DEFAULT_ISOLATION=serializable BACKOFF_CONFORMANCE=1 BACKOFF_CONFORMANCE_MIXED=1 BACKOFF_MIXED_JOBS=$${BACKOFF_MIXED_JOBS:-600} $(GO) test -count=1 -v -timeout 10m ./internal/conformance 2>&1 | scripts/quiet-test-output

.PHONY: test-sharded
test-sharded: ## A PL/Proxy router over three shards: four local PostgreSQL clusters, then the conformance suite's Go, Python and TypeScript workers through a router (scenarios, mixed run with kills; BACKOFF_MIXED_JOBS, default 600), then backoffctl through a router on a local cluster (needs postgresql-15-plproxy)
	set -o pipefail; BACKOFF_SHARDED=1 $(GO) test -count=1 -v -timeout 10m ./internal/shardtest 2>&1 | scripts/quiet-test-output
	set -o pipefail; BACKOFF_CONFORMANCE_SHARDED=1 $(GO) test -count=1 -v -timeout 10m ./internal/conformance 2>&1 | scripts/quiet-test-output
	set -o pipefail; cd cmd/backoffctl && BACKOFF_PG_SERVER=local $(GO) test -count=1 -v -timeout 10m -run TestBackoffctlThroughRouter ./internal/cli 2>&1 | ../../scripts/quiet-test-output

.PHONY: bench-sharded
bench-sharded: ## Calls per second through the router vs straight to one shard (four local clusters; run on a quiet machine), the share of queues a fifth shard moves and a direct-mode Worker vs one database (target lines)
	BACKOFF_SHARDED=1 $(GO) test -count=1 -run '^$$' -bench . -benchtime $${BENCH_TIME:-5s} ./internal/shardtest

.PHONY: test-race
test-race: ## Run every test with the race detector
	set -o pipefail; { rc=0; $(call LIBRARY_TESTS,-race -count=1 $(TEST_FLAGS),$(PKGS)) || rc=1; for m in $(TEST_MODULES); do $(GO) -C $$m test -race -count=1 $(TEST_FLAGS) ./... || rc=1; done; exit $$rc; } 2>&1 | $(TEST_FILTER)

.PHONY: lint
lint: ## gofmt, go vet and staticcheck (every module)
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || { echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet $(PKGS)
	for m in $(CLI) $(TEST_MODULES); do $(GO) -C $$m vet ./... || exit 1; done
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)
	for m in $(CLI) $(TEST_MODULES); do $(GO) -C $$m run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... || exit 1; done

.PHONY: vet
vet: ## go vet of every module
	$(GO) vet $(PKGS)
	for m in $(CLI) $(TEST_MODULES); do $(GO) -C $$m vet ./... || exit 1; done

.PHONY: tidy
tidy: ## go mod tidy in every module
	$(GO) mod tidy
	for m in $(CLI) $(TEST_MODULES); do $(GO) -C $$m mod tidy || exit 1; done

.PHONY: bench
bench: ## Throughput and latency against the raw-SQL limit and River (BENCH_MODE=quick|full, BENCH_ROUNDS, BENCH_DATABASE_URL)
	$(GO) run ./bench -mode=$${BENCH_MODE:-quick} -rounds=$${BENCH_ROUNDS:-0} -river=bench/river

.PHONY: bench-river
bench-river: ## Only the Go Worker end to end and River v0.51.1 side by side (bench/river, its own module)
	$(GO) run ./bench -mode=$${BENCH_MODE:-quick} -rounds=$${BENCH_ROUNDS:-0} -only=river -river=bench/river

.PHONY: demo
demo: build ## Run the demo: a throwaway PostgreSQL, failing workers, retries and dead letters
	$(BIN) demo

.PHONY: migrate
migrate: build ## Apply the migrations to DATABASE_URL
	$(BIN) migrate up

.PHONY: pg-container
pg-container: ## Start the tests' PostgreSQL container with Testcontainers and print its URL; Ctrl-C removes it
	$(GO) -C internal/containers build -o $(CURDIR)/$(PGCONTAINER) ./cmd/pgcontainer && exec $(PGCONTAINER)

.PHONY: pg-image
pg-image: ## Build the local PostgreSQL image from this machine's PostgreSQL 15 binaries (the tests do it when needed)
	internal/pgserver/build-pg-image.sh

.PHONY: golden
golden: ## Rewrite the committed schema dump after an intended schema change
	$(GO) test -count=1 ./internal/migrations -run TestSchemaGolden -update

.PHONY: release
release: ## Release the library: VERSION=x.y.z into version.go, the extension and the CHANGELOG; commit and tag vx.y.z (docs: DEVELOPING.md)
	scripts/release.sh library "$(VERSION)"

.PHONY: release-cli
release-cli: ## After the library's tag is published: the CLI requires it (no replace); commit and tag cmd/backoffctl/vx.y.z
	scripts/release.sh cli "$(VERSION)"

.PHONY: release-rehearsal
release-rehearsal: ## Tag this version in a throwaway clone, then go get / go install it as a user would (offline; CI runs it)
	scripts/release-rehearsal.sh

.PHONY: generate
generate: ## Regenerate dist/backoff.sql, extension/backoff.control, docs/sql/, docs/adr/README.md, README.md's numbers (from docs/benchmarks.md and DEVELOPING.md) and the schema dump (the CLI module has no generated files)
	# dist/backoff.sql first, on its own: the other tests install it
	# (internal/testdb), and a package is built with the file it embeds.
	$(GO) test -count=1 ./internal/distribution -update
	$(GO) test -count=1 ./internal/sqldocs -update
	$(GO) run ./internal/readmegen
	$(GO) test -count=1 ./internal/docstest -run TestADRIndex -update
	$(MAKE) golden

PG_CONFIG ?= pg_config
EXT_VERSION := $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" extension/backoff.control)
.PHONY: install-extension
install-extension: ## Generate the extension script from dist/backoff.sql and install it (CREATE EXTENSION backoff)
	scripts/extension-script.sh dist/backoff.sql > extension/backoff--$(EXT_VERSION).sql
	install -m 644 extension/backoff.control extension/backoff--$(EXT_VERSION).sql "$$($(PG_CONFIG) --sharedir)/extension/"

.PHONY: soak
soak: ## Soak: a mixed load for BACKOFF_SOAK (default 30m); flat throughput, no growth (not part of make test)
	set -o pipefail; BACKOFF_SOAK=$${BACKOFF_SOAK:-30m} $(GO) test -count=1 -v -timeout 0 -run TestSoak ./internal/soaktest 2>&1 | scripts/quiet-test-output

.PHONY: torture
torture: ## Torture: every call from 6 sessions at each isolation level, backends killed, server restarted, checked against a record (TORTURE_SECONDS per level, default 60; TORTURE_SEED replays; TORTURE_ISOLATION=read-committed|repeatable-read|serializable|all)
	set -o pipefail; TORTURE=1 $(GO) test -count=1 -v -timeout 0 -run '^TestTorture$$' ./internal/torture 2>&1 | scripts/quiet-test-output
