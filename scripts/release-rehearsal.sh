#!/usr/bin/env bash
# Rehearse a release end to end without publishing anything: in a throwaway
# clone of HEAD, `make release` and `make release-cli` for the version in
# version.go, then, as a user would, `go get` the tagged library into a new
# program and `go install` the tagged CLI, with the clone standing in for
# github.com/pgbackoff/pgbackoff (git's insteadOf) and every other module
# served from the local module cache (no network). Fails unless the
# installed backoffctl reports the version.
#
# make generate runs inside the library step, so the environment must let
# the tests find a PostgreSQL server (README, "Two commands").
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' version.go)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

git clone -q . "$work/repo"
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
