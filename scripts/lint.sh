#!/usr/bin/env bash
# golangci-lint (.golangci.yml) at a pinned version, installed from the Go
# module proxy with `go install` into $GOLANGCI_LINT_BIN (default: GOPATH/bin)
# unless that version is already there.
#   bash scripts/lint.sh           install if needed, then lint ./...
#   bash scripts/lint.sh install   install only (.ci/run does this while the
#                                  tests run: a cold install takes minutes)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

case ":${PATH}:" in
  *:/usr/local/go/bin:*) ;;
  *) [[ -d /usr/local/go/bin ]] && export PATH="/usr/local/go/bin:${PATH}" ;;
esac

GOLANGCI_LINT_VERSION=v2.15.0
BIN=${GOLANGCI_LINT_BIN:-$(go env GOPATH)/bin}
LINT=$BIN/golangci-lint

install() {
  if [[ -x $LINT ]] && "$LINT" version 2>/dev/null | grep -q "version ${GOLANGCI_LINT_VERSION#v} "; then
    return
  fi
  local start=$SECONDS
  GOBIN=$BIN go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}"
  echo "installed golangci-lint ${GOLANGCI_LINT_VERSION} in $((SECONDS - start))s"
}

case ${1:-run} in
  install) install ;;
  run)
    install
    "$LINT" run ./...
    ;;
  *)
    echo "usage: $0 [install|run]" >&2
    exit 2
    ;;
esac
