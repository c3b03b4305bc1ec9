# The two commands a newcomer needs: `make run` and `make test`.
DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/payments?sslmode=disable
export DATABASE_URL

GO ?= go

.PHONY: help run test chaos bench bench-count build migrate seed vet fuzz clean

## run: build, migrate, seed the demo tenants and Acme's webhook endpoint at the demo receiver, then run
## the stand-in processor (PROCESSOR=fake, the default), worker, API and receiver until Ctrl-C (logs as text; LOG_FORMAT=json for what production writes)
run migrate seed: export LOG_FORMAT ?= text
# Demo secrets, public like the demo API keys: set your own outside a demo.
run seed: export WEBHOOK_SECRETS_KEY ?= ZGVtby1vbmx5LXdlYmhvb2stc2VjcmV0cy1rZXktMzI=
run seed: export RECEIVER_SECRET ?= whsec_ZGVtby1vbmx5LXJlY2VpdmVyLXdlYmhvb2stc2VjcmV0
run seed: export RECEIVER_ADDR ?= :9092
run: export WEBHOOK_ALLOW_PRIVATE_NETWORKS ?= true
run: migrate seed
	./scripts/run.sh

## test: every test, under the race detector, against the Postgres at TEST_DATABASE_URL (default: local);
## then the end-to-end suite again through PgBouncer in transaction mode (skipped, saying so, without pgbouncer)
# (-trimpath: the forking guide's test builds a patched copy of the tree, and trimmed paths let that copy
# reuse this run's build cache for every package the patch leaves alone; -timeout: a cold build cache
# under -race takes minutes before the first test starts)
test: export GOFLAGS := -trimpath $(GOFLAGS)
test:
	$(GO) test -race -count=1 -timeout 30m ./...
	E2E_POOLER=1 $(GO) test -race -count=1 -timeout 30m ./e2e/

## chaos: the invariants under kills, outages and races, with its own stack and database
## (CHAOS_PROFILE=short, about two minutes; pooler, through PgBouncer; failover, on a Patroni pair whose
## primary is killed; or long; CHAOS_SEED repeats a run)
CHAOS_PROFILE ?= short
chaos: build
	$(GO) build -o bin/ ./tools/cmd/chaos
	CHAOS_PROFILE=$(CHAOS_PROFILE) ./bin/chaos

## bench: the service as ratios to the machine's ceilings, measured in one run (BENCH_DURATION a mode)
bench:
	$(GO) build -o bin/ ./tools/cmd/bench
	./bin/bench

## bench-count: instructions of Go (callgrind) and allocations a request: replay, new key, bare handler
bench-count:
	$(GO) build -o bin/ ./tools/cmd/benchcount
	./bin/benchcount

## build: the four binaries into bin/
build:
	$(GO) build -o bin/ ./cmd/api ./cmd/worker ./tools/cmd/fakeprocessor ./tools/cmd/demoreceiver ./tools/cmd/stripesim

## migrate: create the database if missing and apply every migration (goose, then River's)
migrate: build
	./bin/api migrate

## seed: create the demo tenants sk_test_acme and sk_test_globex, and Acme's webhook endpoint at the
## demo receiver (development only)
seed: build
	APP_ENV=development ./bin/api seed -webhook-url "http://localhost$${RECEIVER_ADDR}/webhooks" -webhook-secret "$${RECEIVER_SECRET}"

## vet: gofmt and go vet
vet:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) vet ./...

## fuzz: run each fuzz target for FUZZTIME (default 5m), one after the other; failing inputs land in testdata/fuzz
FUZZTIME ?= 5m
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseKey$$' -fuzztime $(FUZZTIME) ./internal/idempotency/
	$(GO) test -run '^$$' -fuzz '^FuzzFingerprint$$' -fuzztime $(FUZZTIME) ./internal/idempotency/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeHeaders$$' -fuzztime $(FUZZTIME) ./internal/idempotency/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeBody$$' -fuzztime $(FUZZTIME) ./internal/http/
	$(GO) test -run '^$$' -fuzz '^FuzzRouter$$' -fuzztime $(FUZZTIME) ./internal/http/

clean:
	rm -rf bin/ chaos-logs/

## help: list these targets, from their comments
help:
	@awk '/^## [a-z-]+:/ { sub(/^## /, ""); split($$0, t, ":"); sub(/^[^:]*: */, ""); printf "\n  %-11s %s\n", t[1], $$0; next } \
		/^## / { sub(/^## /, ""); printf "  %-11s %s\n", "", $$0 }' $(MAKEFILE_LIST)
