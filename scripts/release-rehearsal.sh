#!/usr/bin/env bash
# Rehearse a release end to end without publishing anything: in a throwaway
# clone of HEAD, `make release` and `make release-cli` for the version in
# version.go, then, as a user would, `go get` the tagged library into a new
# program and `go install` the tagged CLI, with the clone standing in for
# github.com/pgbackoff/pgbackoff (git's insteadOf) and every other module
# served from the local module cache (no network). Fails unless the
# installed backoffctl reports the version.
#
# Then the README's "Getting it" from a checkout, before any tag is
# reachable: each command it names (git clone, a replace directive and go
# mod tidy, a go work workspace, go install of the CLI from the checkout)
# runs in a throwaway directory beside a clone of the checkout, with
# GOFLAGS=-mod=mod as a user's first build would have it; the README must
# still name each command, so the two cannot drift apart. The program there
# imports only client, and its go.sum and `go list -m all` must stay within
# the bounds of docs/adr/0085-client-importers-resolve-few-modules.md.
#
# make generate runs inside the library step, so the environment must let
# the tests find a PostgreSQL server (README, "Two commands").
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' version.go)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# --no-tags: a release tag of this repository (made by make release, never
# pushed) must not stop the rehearsal from tagging the same version again.
git clone -q --no-tags . "$work/repo"
cat >"$work/gitconfig" <<EOF
[url "$work/repo"]
	insteadOf = https://github.com/pgbackoff/pgbackoff
[user]
	name = release rehearsal
	email = rehearsal@localhost
[safe]
	directory = *
EOF
cache=$(go env GOMODCACHE)
export GIT_CONFIG_GLOBAL="$work/gitconfig"
export GOPRIVATE=github.com/pgbackoff
export GOPROXY="file://$cache/cache/download"
# Checksums come from the go.sum files and the local cache (verified when
# it was filled); the public checksum database is not reachable offline.
export GOMODCACHE="$work/modcache" GOFLAGS=-modcacherw GOTOOLCHAIN=local GOSUMDB=off

(cd "$work/repo" && scripts/release.sh library "$version" >/dev/null && scripts/release.sh cli "$version" >/dev/null)

mkdir "$work/app"
(
  cd "$work/app"
  go mod init example.com/app >/dev/null 2>&1
  cat >main.go <<'EOF'
package main

import (
	"fmt"

	"github.com/pgbackoff/pgbackoff"
	"github.com/pgbackoff/pgbackoff/client"
)

func main() { fmt.Println(pgbackoff.Version, client.ErrJobNotFound != nil) }
EOF
  go get "github.com/pgbackoff/pgbackoff@v$version" >/dev/null 2>&1 || go get "github.com/pgbackoff/pgbackoff@v$version"
  go mod tidy >/dev/null 2>&1 || go mod tidy
  got=$(go run .)
  [ "$got" = "$version true" ] || { echo "release rehearsal: a program built on the tagged library printed '$got'" >&2; exit 1; }
)
GOBIN="$work/bin" go install "github.com/pgbackoff/pgbackoff/cmd/backoffctl@v$version"
got=$("$work/bin/backoffctl" --version)
[ "$got" = "backoffctl $version" ] || { echo "release rehearsal: the installed CLI printed '$got'" >&2; exit 1; }
echo "release rehearsal: v$version tagged in a clone; go get of the library and go install of backoffctl@v$version work without replace"

# The README names these; the tag's two commands ran above.
tag_commands=(
  "go get github.com/pgbackoff/pgbackoff@v$version"
  "go install github.com/pgbackoff/pgbackoff/cmd/backoffctl@v$version"
)
clone_command="git clone https://github.com/pgbackoff/pgbackoff ../pgbackoff"
replace_commands=(
  "go mod edit -require=github.com/pgbackoff/pgbackoff@v$version -replace=github.com/pgbackoff/pgbackoff=../pgbackoff"
  "go mod tidy"
)
workspace_command="go work init . ../pgbackoff"
cli_command="go -C ../pgbackoff/cmd/backoffctl install ."
for c in "${tag_commands[@]}" "$clone_command" "${replace_commands[@]}" "$workspace_command" "$cli_command"; do
  grep -qxF "$c" <(sed -n '/^### Getting it$/,/^### /p' README.md) ||
    { echo "release rehearsal: README.md's \"Getting it\" no longer names: $c" >&2; exit 1; }
done

# Bounds on what a program that imports only client resolves (ADR 0085):
# go.sum lists what go mod tidy downloaded or verified; go list -m all the
# module graph, most of it the library's requirements, never downloaded.
max_sum_modules=22
max_graph_modules=44

mkdir "$work/user"
main_go='package main

import (
	"fmt"

	"github.com/pgbackoff/pgbackoff/client"
)

func main() { fmt.Println(client.ErrJobNotFound != nil) }
'
(
  mkdir -p "$work/user/replace" "$work/user/workspace"
  # With a replace: GOFLAGS=-mod=mod, as a first build without a go.sum.
  cd "$work/user/replace"
  bash -c "$clone_command" 2>/dev/null || { echo "release rehearsal: failed: $clone_command" >&2; exit 1; }
  GOFLAGS="-mod=mod $GOFLAGS" go mod init example.com/app >/dev/null 2>&1
  printf '%s' "$main_go" >main.go
  for c in "${replace_commands[@]}"; do
    GOFLAGS="-mod=mod $GOFLAGS" bash -c "$c" || { echo "release rehearsal: failed in a program beside a checkout: $c" >&2; exit 1; }
  done
  got=$(GOFLAGS="-mod=mod $GOFLAGS" go run .)
  [ "$got" = "true" ] || { echo "release rehearsal: a program built on a checkout with replace printed '$got'" >&2; exit 1; }
  # Read before go list, which adds the go.mod checksums of the whole
  # graph to go.sum.
  tidied=$(awk '{print "  " $1}' go.sum | sort -u)
  sum=$(printf '%s\n' "$tidied" | wc -l)
  graph=$(GOFLAGS="-mod=mod $GOFLAGS" go list -m all | wc -l)
  echo "release rehearsal: a program that imports only client: $sum modules in go.sum (at most $max_sum_modules), $graph in go list -m all (at most $max_graph_modules)"
  if [ "$sum" -gt "$max_sum_modules" ] || [ "$graph" -gt "$max_graph_modules" ]; then
    echo "release rehearsal: importing client resolves more modules than docs/adr/0085 allows; go mod tidy left in its go.sum:" >&2
    printf '%s\n' "$tidied" >&2
    exit 1
  fi
  # With a workspace: no -mod flag, which the go command refuses in
  # workspace mode; go.mod stays without a requirement on the library.
  cd ../workspace
  go mod init example.com/app >/dev/null 2>&1
  printf '%s' "$main_go" >main.go
  bash -c "$workspace_command" || { echo "release rehearsal: failed: $workspace_command" >&2; exit 1; }
  got=$(go run .)
  [ "$got" = "true" ] || { echo "release rehearsal: a program built in a workspace with a checkout printed '$got'" >&2; exit 1; }
  # The CLI from the checkout: its module's replace points at the library
  # in the same checkout, and the checkout's go.work joins the two (no -mod
  # flag either, for the same reason).
  GOBIN="$work/user/bin" bash -c "$cli_command" || { echo "release rehearsal: failed: $cli_command" >&2; exit 1; }
  got=$("$work/user/bin/backoffctl" --version)
  [ "$got" = "backoffctl $version" ] || { echo "release rehearsal: backoffctl built from a checkout printed '$got'" >&2; exit 1; }
)
echo "release rehearsal: from a checkout, the replace directive, the go work workspace and go install of the CLI work as README.md says"
