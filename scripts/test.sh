#!/usr/bin/env bash
# test.sh - the project's test command. From anywhere:
#
#   scripts/test.sh                    every package, simulator and real ZooKeeper
#   scripts/test.sh -run TestLock -v   extra arguments go to `go test`
#   PKGS=./testkit scripts/test.sh     only some packages
#   ZK_REQUIRED=1 scripts/test.sh      a missing ZooKeeper fails instead of skipping
#
# It installs ZooKeeper when it is missing and it can (scripts/install-zookeeper.sh),
# and Chromium for the test that renders the demo's timeline page
# (scripts/install-chromium.sh), then checks formatting (gofmt -l) and that
# `go generate ./...` leaves docs/ as committed, runs `go vet PKGS`,
# staticcheck PKGS (the pinned version below, built by `go run`) and
#   go test -race -count=1 -timeout 20m ARGS PKGS
# and fails if any of the five did.
# Real servers are started by the tests themselves (package testkit), on
# loopback with free ports; no server needs to be running beforehand.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
command -v go >/dev/null 2>&1 || { echo "test.sh: no go on PATH or in /usr/local/go/bin" >&2; exit 1; }

bash scripts/install-zookeeper.sh
bash scripts/install-chromium.sh

read -r -a pkgs <<<"${PKGS:-./...}"

# Every check runs, so one run shows every problem; any failure fails it.
status=0

unformatted=$(gofmt -l . 2>&1)
if [[ -n $unformatted ]]; then
  echo "test.sh: not gofmt-ed (run gofmt -w on them):" >&2
  echo "$unformatted" >&2
  status=1
fi

# The generated docs (state diagrams) must be the code's.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "+ go generate ./... && git diff --exit-code docs/" >&2
  if ! { go generate ./... && git diff --exit-code -- docs/; }; then
    echo "test.sh: docs/ is stale: run go generate ./... and commit it" >&2
    status=1
  fi
fi

echo "+ go vet ${pkgs[*]}" >&2
go vet "${pkgs[@]}" || status=1

staticcheck=honnef.co/go/tools/cmd/staticcheck@v0.8.2
echo "+ staticcheck ${pkgs[*]}" >&2
go run "$staticcheck" "${pkgs[@]}" || status=1

echo "+ go test -race -count=1 -timeout 20m $* ${pkgs[*]}" >&2
go test -race -count=1 -timeout 20m "$@" "${pkgs[@]}" || status=1

exit $status
