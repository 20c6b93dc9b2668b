#!/usr/bin/env bash
# Cut a release of pgbackoff: one version for the SQL schema, the extension,
# the Go library and the backoffctl CLI (TestVersionIsOne keeps them equal).
#
#   scripts/release.sh library VERSION   (make release VERSION=…)
#     writes VERSION into version.go, the extension control file and
#     dist/backoff.sql (make generate), dates the CHANGELOG's [Unreleased]
#     section, commits "Release vVERSION" and tags vVERSION. Push the commit
#     and the tag; from then on `go get github.com/pgbackoff/pgbackoff@vVERSION`
#     works.
#   scripts/release.sh cli VERSION       (make release-cli VERSION=…)
#     once the library's tag is published: makes the CLI module require the
#     tagged library with no replace (go mod tidy fetches it, so go.sum holds
#     its real checksum), commits and tags cmd/backoffctl/vVERSION, then puts the
#     development replace back in a commit of its own. Push both commits and
#     the tag; then `go install
#     github.com/pgbackoff/pgbackoff/cmd/backoffctl@vVERSION` works.
#
# Two steps because the CLI's go.sum must hold the checksum of the library
# as published, which exists only once the library's tag is.
set -euo pipefail
cd "$(dirname "$0")/.."

step=${1:-}
version=${2:-}
usage() { echo "usage: scripts/release.sh library|cli VERSION (VERSION like 0.2.0)" >&2; exit 2; }
[[ "$step" == library || "$step" == cli ]] || usage
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || usage
tag=v$version
[ -z "$(git status --porcelain)" ] || { echo "release: the work tree has changes; commit or stash them first" >&2; exit 1; }

case $step in
library)
  git rev-parse -q --verify "refs/tags/$tag" >/dev/null && { echo "release: tag $tag exists already" >&2; exit 1; }
  grep -q '^## \[Unreleased\]$' CHANGELOG.md || { echo "release: CHANGELOG.md has no [Unreleased] section to release" >&2; exit 1; }
  sed -i "s/^const Version = \".*\"$/const Version = \"$version\"/" version.go
  make --no-print-directory generate >/dev/null
  today=$(date -u +%Y-%m-%d)
  # The released section takes the notes; a new empty [Unreleased] opens.
  sed -i "s/^## \[Unreleased\]$/## [Unreleased]\n\n## [$version] - $today/" CHANGELOG.md
  sed -i "s|^\[Unreleased\]: .*$|[Unreleased]: https://github.com/pgbackoff/pgbackoff/compare/$tag...HEAD\n[$version]: https://github.com/pgbackoff/pgbackoff/releases/tag/$tag|" CHANGELOG.md
  go test -count=1 -run TestVersionIsOne . >/dev/null
  git add -A
  git commit -q -m "Release $tag"
  git tag -a "$tag" -m "pgbackoff $tag"
  echo "release: committed and tagged $tag; push with: git push origin HEAD $tag"
  echo "release: then, once the tag is published: make release-cli VERSION=$version"
  ;;
cli)
  git rev-parse -q --verify "refs/tags/$tag" >/dev/null || { echo "release: tag $tag does not exist: run make release VERSION=$version first" >&2; exit 1; }
  clitag=cmd/backoffctl/$tag
  git rev-parse -q --verify "refs/tags/$clitag" >/dev/null && { echo "release: tag $clitag exists already" >&2; exit 1; }
  grep -q "^const Version = \"$version\"$" version.go || { echo "release: version.go is not at $version" >&2; exit 1; }
  (
    cd cmd/backoffctl
    export GOWORK=off
    go mod edit -dropreplace=github.com/pgbackoff/pgbackoff -require="github.com/pgbackoff/pgbackoff@$tag"
    go mod tidy
    go build ./...
  )
  go test -count=1 -run TestVersionIsOne . >/dev/null
  git add -A
  git commit -q -m "backoffctl $tag: requires the library at $tag"
  git tag -a "$clitag" -m "backoffctl $tag"
  (cd cmd/backoffctl && go mod edit -replace=github.com/pgbackoff/pgbackoff=../..)
  git add -A
  git commit -q -m "Development after $tag: the CLI builds against the library in this tree again"
  echo "release: tagged $clitag; push with: git push origin HEAD $clitag"
  ;;
esac
