# A newcomer's loop. `make test` is what CI runs (.ci/run); the other targets are its
# parts, for the edit-test cycle. CONTRIBUTING.md says what each needs.

GO ?= go
# staticcheck 2026.2.2 is module version v0.8.2.
STATICCHECK_VERSION ?= v0.8.2

.PHONY: test unit test-pg e2e fuzz lint fixtures bench ci-under-load build deploy-check

test: ## the whole suite, as CI runs it
	bash .ci/run

unit: ## the tests with -race, without PostgreSQL (its tests skip)
	$(GO) test -race -count=1 ./...

test-pg: ## the packages with PostgreSQL tests, on throwaway clusters
	.ci/postgres.sh $(GO) test -race -count=1 ./ystore/postgres/... ./cmd/...

e2e: ## the end-to-end tests on the built binary (Postgres clusters started for them)
	.ci/postgres.sh $(GO) test -race -count=1 -timeout 20m ./sidecar/e2e/...

fuzz: ## every fuzz target, FUZZ_EXECS inputs each (default 10000)
	scripts/fuzz.sh

lint: ## gofmt, go vet, staticcheck (pinned)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

fixtures: ## regenerate the fixtures of the real Yjs, @jupyter/ydoc and MCP SDKs (Node)
	for lock in testdata/*/package-lock.json; do (cd "$$(dirname "$$lock")" && npm ci --no-audit --no-fund); done
	scripts/fixtures.sh
	git status --short -- $$(scripts/fixtures.sh --paths)

bench: ## the engine against Yjs and ywasm in Node (bench/run.sh); more in docs/BENCHMARKS.md
	bench/run.sh

ci-under-load: ## CI five times on fresh clones while two busy loops load the cores
	scripts/ci-under-load.sh 5 2

build: ## a static, stamped binary
	scripts/build.sh

deploy-check: ## what operators run: the image (buildah, root), the k8s recipes, the systemd units
	scripts/image-check.sh
	cd scripts/k8scheck && $(GO) test -count=1 ./...
	scripts/unit-check.sh
