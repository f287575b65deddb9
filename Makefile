# agentd suite — developer entry points.
#
#   make demo    build and run agentd on its embedded demo config, query it
#   make test    build, lint, format check and every test (what CI runs)
#   make bench   selection and ARPX benchmarks (divan), mesh and peer-path scenarios
#   make bench-local  direct vs nginx vs agent-gw latency/throughput, JSON out
#   make test-python  system tests (tests/, pytest, real binaries; needs root)
#   make fuzz    every cargo-fuzz target for a bounded time (nightly)

CARGO      ?= cargo
FUZZ_SECS  ?= 30
# Where `make demo` finds the binaries (dev profile: fast to build).
BIN_DIR    ?= target/debug

.PHONY: all demo test toolchain build clippy fmt-check fuzz-check test-rust test-python venv bench bench-local fuzz router-openwrt

all: test

toolchain:
	@command -v $(CARGO) >/dev/null 2>&1 || { \
	  echo "error: cargo not found. Install Rust with rustup (https://rustup.rs), then re-run make." >&2; exit 1; }
	@command -v rustup >/dev/null 2>&1 || \
	  echo "note: rustup not found; using $$($(CARGO) --version). 'make fuzz' needs rustup's nightly toolchain." >&2
	@$(CARGO) clippy --version >/dev/null 2>&1 || { \
	  echo "error: clippy missing: rustup component add clippy" >&2; exit 1; }
	@$(CARGO) fmt --version >/dev/null 2>&1 || { \
	  echo "error: rustfmt missing: rustup component add rustfmt" >&2; exit 1; }

build: toolchain
	$(CARGO) build --workspace --all-targets

clippy: toolchain
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt-check: toolchain
	$(CARGO) fmt --all --check

# nextest when installed (parallel, clearer failures); doc tests still need
# plain cargo test because nextest does not run them.
# `set -e` and one command per line: a failing nextest run must fail the
# target (a `cmd && echo; next` chain would hand on only the doc tests'
# status).
test-rust: build
	@set -e; if command -v cargo-nextest >/dev/null 2>&1; then \
	  echo "$(CARGO) nextest run --workspace"; \
	  $(CARGO) nextest run --workspace --no-tests=pass; \
	  echo "$(CARGO) test --workspace --doc"; \
	  $(CARGO) test --workspace --doc; \
	else \
	  echo "$(CARGO) test --workspace"; $(CARGO) test --workspace; \
	fi

# ---- test-python: system tests (tests/, pytest) ---------------------------
# A venv in $(VENV) with tests/requirements.txt and our SDK
# (pip install ./sdk-python-bindings), then pytest against the real agentd,
# agentctl and agent-gw debug binaries. Root is needed for the network
# namespaces of the nexilume tests (CI runs as root).
# Tests of known, open product bugs are marked xfail(strict=False) with the
# bug in the reason; pytest lists them (XFAIL/XPASS) at the end of the run.
VENV        ?= .venv
PYTHON      ?= python3
PYTEST_ARGS ?=

$(VENV)/.requirements: tests/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

venv: $(VENV)/.requirements
	$(VENV)/bin/pip install --quiet --disable-pip-version-check ./sdk-python-bindings

test-python: toolchain venv
	@command -v ip >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing iproute2 (network namespaces for the system tests)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null; \
	  else \
	    echo "error: the system tests need iproute2 ('ip') for network namespaces: apt-get install iproute2" >&2; exit 1; \
	  fi; }
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (the LuCI views run in headless Chromium: tests/test_luci.py)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "error: the LuCI tests need Debian's chromium: apt-get install chromium" >&2; exit 1; \
	  fi; }
	@command -v shellcheck >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing shellcheck (the OpenWrt feed's shell files)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null; \
	  else \
	    echo "error: the feed tests need shellcheck: apt-get install shellcheck" >&2; exit 1; \
	  fi; }
	@{ command -v avahi-daemon && command -v avahi-browse && command -v dbus-daemon; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing avahi-daemon, avahi-utils, dbus (an independent mDNS browser next to agentd: tests/test_discovery.py)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq avahi-daemon avahi-utils dbus >/dev/null; \
	  else \
	    echo "error: the discovery tests need avahi: apt-get install avahi-daemon avahi-utils dbus" >&2; exit 1; \
	  fi; }
	@dpkg -s libnss-mdns >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing libnss-mdns (a LAN host resolves nexus-router.local through avahi: tests/test_router_finding.py)"; \
	    echo "  (its postinst edits /etc/nsswitch.conf; the file is put back: the test's hosts use their own)"; \
	    cp -p /etc/nsswitch.conf /etc/nsswitch.conf.agentd-keep && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnss-mdns >/dev/null; \
	    mv /etc/nsswitch.conf.agentd-keep /etc/nsswitch.conf; \
	  else \
	    echo "error: the router-finding tests need libnss-mdns: apt-get install libnss-mdns" >&2; exit 1; \
	  fi; }
	@{ command -v nsd && command -v unbound && command -v ldns-signzone && command -v kdig; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing nsd, unbound, ldnsutils, knot-dnsutils (a real DNS server and validating resolver: tests/test_dnssd_unicast.py)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nsd unbound ldnsutils knot-dnsutils >/dev/null; \
	  else \
	    echo "error: the unicast DNS-SD tests need Debian's nsd, unbound, ldnsutils and knot-dnsutils: apt-get install nsd unbound ldnsutils knot-dnsutils" >&2; exit 1; \
	  fi; }
	@command -v nft >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing nftables (a NAT router in a namespace: tests/test_relay.py)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null; \
	  else \
	    echo "error: the relay tests need Debian's nftables: apt-get install nftables" >&2; exit 1; \
	  fi; }
	@{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing prometheus (promtool and a real server scrape /metrics: tests/test_metrics.py)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; \
	  else \
	    echo "error: the metrics tests need Debian's prometheus (promtool, prometheus): apt-get install prometheus" >&2; exit 1; \
	  fi; }
	$(CARGO) build -p agentd -p agent-gw --bins
	$(VENV)/bin/python -m pytest sdk-python-bindings/tests $(PYTEST_ARGS)
	AGENTD_TEST_NO_BUILD=1 $(VENV)/bin/python -m pytest tests $(PYTEST_ARGS)

# The fuzz crate sits outside the workspace (cargo-fuzz builds it on
# nightly); checking it here keeps every target compiling against the
# decoders it exercises.
fuzz-check: toolchain
	$(CARGO) check --manifest-path fuzz/Cargo.toml --locked --bins

# The router build as OpenWrt's packages feed makes it (profile
# router-openwrt = rust-package.mk's settings: opt-level z (Cargo.toml
# keeps dependencies at s), LTO, one codegen unit, overflow checks on,
# panic=unwind), only what the feed installs: the multi-call binary
# agentd-suite and its links agentd, agent-gw, agentctl; its size as JSON
# (target/router-openwrt/sizes.json); then the OpenWrt packaging tests
# (rpcd plugin against a running stack, init scripts, reload) on those
# links, so an overflow panic shows up here.
router-openwrt: toolchain venv
	$(PYTHON) scripts/router_build.py
	AGENTD_BIN_DIR=target/router-openwrt AGENTD_TEST_NO_BUILD=1 $(VENV)/bin/python -m pytest \
	  tests/test_openwrt_rpcd.py tests/test_openwrt_init.py $(PYTEST_ARGS)

test: build clippy fmt-check fuzz-check test-rust test-python router-openwrt

demo: toolchain venv
	@command -v nsd >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing nsd (the DNS server the two demo routers find each other through)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nsd >/dev/null; \
	  else \
	    echo "error: the demo's DNS-SD part needs Debian's nsd: apt-get install nsd" >&2; exit 1; \
	  fi; }
	@[ "$$(id -u)" != 0 ] || command -v nft >/dev/null 2>&1 || { \
	  echo "installing nftables (the NAT router of the relay demo)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null; }
	$(CARGO) build -p agentd -p agent-gw --bins
	BIN_DIR=$(BIN_DIR) scripts/demo.sh
	BIN_DIR=$(BIN_DIR) $(VENV)/bin/python scripts/demo_gateway.py
	BIN_DIR=$(BIN_DIR) $(VENV)/bin/python scripts/demo_mesh.py
	BIN_DIR=$(BIN_DIR) $(VENV)/bin/python scripts/demo_relay.py

# Direct HTTP vs nginx reverse proxy vs agent-gw (router `release` build and
# opt-level 3 `bench-release`), same backend and load generator, interleaved
# rounds, medians; installs Debian nginx if missing. JSON in
# target/bench/local.json. Knobs: BENCH_ROUNDS, BENCH_N1, BENCH_N16,
# BENCH_SIZES, BENCH_PROFILES; BENCH_ARGS=--callgrind counts agent-gw's
# instructions per request instead (deterministic; needs valgrind).
bench-local: toolchain
	$(PYTHON) scripts/bench_local.py $(BENCH_ARGS)

# Selection (divan), ARPX update processing (divan) and the heap bytes it
# holds per path learned from a peer (paths_held, JSON), the heap bytes per
# route of the two route tables alone (route_tables: the floor of
# bench_footprint.py's bytes per route, target/bench/route_tables.json),
# the mesh scenarios and
# the cross-router data plane vs direct and an nginx TLS chain (routers in
# network namespaces, router build; needs root): JSON in
# target/bench/select.json, target/bench/mesh.json, target/bench/peer.json,
# target/bench/local.json (bench-local's one-hop comparison with nginx),
# target/bench/memory.json (agentd RSS before, at and after a transient
# 10k-route snapshot over a real ARPX session). Each JSON's "goals" object
# says which of the data plane's goals held. target/bench/cgroup.json: the
# smallest memory cgroup (1 MiB steps) the router build's agentd + agent-gw
# serve a bounded 8 KiB echo load at c16 in, with two mTLS peers, discovery
# on and 1k routes (knobs BENCH_CGROUP_CALLS, BENCH_CGROUP_ROUTES).
# BENCH_PEER_ARGS=--rows ... picks rows of bench_peer.py (default: all).
bench: toolchain venv
	$(CARGO) bench -p agentd --bench select
	$(CARGO) bench -p arpx --bench updates
	$(CARGO) bench -p arpx --bench paths_held
	$(CARGO) bench -p agentd --bench route_tables
	$(VENV)/bin/python scripts/bench_mesh.py
	$(VENV)/bin/python scripts/bench_peer.py $(BENCH_PEER_ARGS)
	$(VENV)/bin/python scripts/bench_relay.py
	$(VENV)/bin/python scripts/bench_ipv6.py
	$(VENV)/bin/python scripts/bench_cgroup.py
	$(VENV)/bin/python scripts/bench_footprint.py
	$(PYTHON) scripts/bench_local.py $(BENCH_ARGS)
	$(VENV)/bin/python scripts/bench_memory.py

# Runs every target under fuzz/fuzz_targets for FUZZ_SECS seconds each.
fuzz: toolchain
	@command -v rustup >/dev/null 2>&1 || { echo "error: make fuzz needs rustup with a nightly toolchain" >&2; exit 1; }
	@rustup toolchain list | grep -q '^nightly' || { echo "error: no nightly toolchain: rustup toolchain install nightly" >&2; exit 1; }
	@$(CARGO) fuzz --version >/dev/null 2>&1 || $(CARGO) install cargo-fuzz --locked
	@test -d fuzz/fuzz_targets || { echo "error: no fuzz/fuzz_targets directory" >&2; exit 1; }
	@set -e; for t in $$($(CARGO) +nightly fuzz list); do \
	  echo "== fuzz $$t ($(FUZZ_SECS)s)"; \
	  $(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECS); \
	done
