#!/usr/bin/env bash
# The test suite: race-enabled tests of every package, then a short fuzz of
# every fuzz target (found by grepping `func FuzzXxx(` in *_test.go files, so
# new targets run without editing this file). Needs Redis: see
# WAKEGATE_TEST_REDIS_URL (default redis://127.0.0.1:6379/0) and redis-server
# on PATH; .ci/run provides both.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

case ":${PATH}:" in
  *:/usr/local/go/bin:*) ;;
  *) [[ -d /usr/local/go/bin ]] && export PATH="/usr/local/go/bin:${PATH}" ;;
esac

# An execution count, not a duration: Go 1.26's fuzz coordinator races on
# -fuzztime given as a duration.
FUZZTIME=${FUZZTIME:-2000x}

step() { printf '\n==> %s\n' "$*"; }

step "go test -race -count=1 -timeout 12m ./..."
go test -race -count=1 -timeout 12m ./...

# "pkgdir target" lines, one per fuzz target, skipping vendor, testdata and
# hidden directories.
fuzz_targets() {
  find . -type d \( -name vendor -o -name testdata -o -name '.?*' \) -prune \
    -o -type f -name '*_test.go' -print |
    sort |
    while IFS= read -r file; do
      sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\([[:space:]]*[A-Za-z_][A-Za-z0-9_]*[[:space:]]+\*testing\.F[[:space:]]*\).*/\1/p' "$file" |
        while IFS= read -r target; do
          printf '%s %s\n' "$(dirname "$file")" "$target"
        done
    done
}

mapfile -t targets < <(fuzz_targets)
failed=()
for entry in "${targets[@]}"; do
  pkg=${entry% *}
  target=${entry#* }
  step "fuzz ${pkg} ${target} (-fuzztime ${FUZZTIME})"
  if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"; then
    failed+=("${pkg} ${target}")
  fi
done

step "summary"
echo "fuzz targets run: ${#targets[@]}"
if ((${#failed[@]})); then
  printf 'FAILED fuzz target: %s\n' "${failed[@]}" >&2
  echo "(failing inputs are written under <pkg>/testdata/fuzz/<target>/: commit them)" >&2
  exit 1
fi
echo "all tests passed"
