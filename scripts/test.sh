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

# Each part has a time budget: unit and race 5 min, standalone copy 3 min,
# integration 6 min, fault tests 3 min, fuzz 1 min. A part over its budget is named in
# the summary; WAKEGATE_CI_STRICT_BUDGET=1 makes that a failure (off by
# default: a shared machine's neighbours can slow any part).
FAULTS='Fault|Durability|WorkerKill|PushWorker|Isolation'
declare -a over=() timings=()
timed() { # timed NAME BUDGET_SECONDS CMD...
  local name=$1 budget=$2 start=$SECONDS
  shift 2
  "$@"
  local took=$((SECONDS - start))
  timings+=("$(printf '%-20s %4ds (budget %ds)' "$name" "$took" "$budget")")
  if ((took > budget)); then over+=("$name: ${took}s > ${budget}s"); fi
}

mapfile -t unit_pkgs < <(go list ./... | grep -v '/integration$')
step "unit and race: go test -race -count=1 <every package but integration>"
timed "unit and race" 300 go test -race -count=1 -timeout 8m "${unit_pkgs[@]}"

# The repository must stand on its own: its tracked files alone, copied into
# an empty directory with no siblings (nothing beside it to find by a
# relative path), must build and pass the tests that read files of the
# repository (testdata/, docs/, deployments/) — the fixture readers found by
# grepping "testdata" in *_test.go, and the docs link check in
# ./cmd/wakegate. The integration tests read the same testdata/github
# through the same kind of path; they run once, in place, below (building
# their binary again here would cost a minute). Without -race, to stay
# within its budget: the race part above runs the same tests in place.
standalone() {
  if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "standalone copy: needs a git checkout to list the tracked files" >&2
    return 1
  fi
  local outer copy
  outer=$(mktemp -d)
  copy="$outer/wakegate"
  mkdir "$copy"
  git ls-files -z | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$copy"
  echo "copied $(git ls-files | wc -l) tracked files to $copy (its parent holds nothing else)"
  local pkgs
  mapfile -t pkgs < <(git grep -l 'testdata' -- '*_test.go' | xargs -n1 dirname | sort -u | sed 's|^|./|' | grep -v '^./integration$')
  local rc=0
  # Chained with &&: set -e does not apply inside a subshell run under ||.
  (
    cd "$copy" &&
      set -x &&
      go build ./... &&
      go test -count=1 -timeout 5m "${pkgs[@]}"
  ) || rc=$?
  rm -rf "$outer"
  return "$rc"
}
step "standalone copy: the tracked files alone, in an empty directory: go build, go test of the testdata readers"
timed "standalone copy" 180 standalone

step "integration: go test -race -count=1 -skip '${FAULTS}' ./integration"
timed "integration" 360 go test -race -count=1 -timeout 10m -skip "$FAULTS" ./integration
step "fault tests: go test -race -count=1 -run '${FAULTS}' ./integration"
timed "fault tests" 180 go test -race -count=1 -timeout 8m -run "$FAULTS" ./integration

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
# Each package's fuzz binary is built once (go test -c -fuzz) and runs
# each of its targets from the package's directory, as go test -fuzz would
# (testdata/fuzz corpora, failing inputs written there, the same fuzz
# cache): linking one test binary per target was most of this part's time.
# ./gateway, which imports nearly every instrumented dependency, is built
# first and alone; the others then find those in the build cache and build
# a few at a time. Built all at once, each compiled the shared dependencies
# itself: on a cold cache that was 6 minutes against 4.5.
fuzz_all() {
  local bins gocache
  bins=$(mktemp -d)
  gocache=$(go env GOCACHE)
  build() { go test -c -fuzz=. -o "$1/$(echo "$2" | tr / _).test" "$2"; }
  export -f build
  local pkg rest=()
  for pkg in $(printf '%s\n' "${targets[@]%% *}" | sort -u); do
    if [[ $pkg == ./gateway ]]; then build "$bins" "$pkg"; else rest+=("$pkg"); fi
  done
  if ((${#rest[@]})); then
    printf '%s\n' "${rest[@]}" | xargs -P 3 -I{} bash -c 'build "$@"' _ "$bins" {}
  fi
  for entry in "${targets[@]}"; do
    pkg=${entry% *}
    target=${entry#* }
    step "fuzz ${pkg} ${target} (-fuzztime ${FUZZTIME})"
    if ! (cd "$pkg" && "$bins/$(echo "$pkg" | tr / _).test" -test.run='^$' -test.fuzz="^${target}\$" \
      -test.fuzztime="$FUZZTIME" -test.fuzzcachedir="${gocache}/fuzz/$(go list "./")"); then
      failed+=("${pkg} ${target}")
    fi
  done
  rm -rf "$bins"
}
timed "fuzz" 60 fuzz_all

step "summary"
printf '%s\n' "${timings[@]}"
echo "fuzz targets run: ${#targets[@]}"
if ((${#over[@]})); then
  printf 'OVER BUDGET: %s\n' "${over[@]}" >&2
  if [[ ${WAKEGATE_CI_STRICT_BUDGET:-0} == 1 ]]; then exit 1; fi
fi
if ((${#failed[@]})); then
  printf 'FAILED fuzz target: %s\n' "${failed[@]}" >&2
  echo "(failing inputs are written under <pkg>/testdata/fuzz/<target>/: commit them)" >&2
  exit 1
fi
echo "all tests passed"
