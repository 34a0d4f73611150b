#!/bin/sh
# Builds reactord's release packages into dist/: a static binary for each
# architecture (ARCHES, default "amd64 arm64") and, with nfpm, a .deb and
# an .rpm of each. nfpm is installed (pinned) when it is not on PATH.
#
#   packaging/build.sh            # all of them
#   ARCHES=amd64 packaging/build.sh
set -eu
cd "$(dirname "$0")/.."
NFPM_VERSION=v2.45.2
# The package version: a release tag's (v1.2.3 → 1.2.3), else the last
# release's (0.0.0 before the first) + the commit's time and hash, so that
# builds between releases sort after it and in the order of their commits
# (a bare hash, which may start with a digit, sorted at random: dpkg saw
# 7e95cdf as older than 7582bda and refused to "downgrade").
if [ -n "${VERSION:-}" ]; then
  version=${VERSION#v}
elif tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null) && git diff --quiet HEAD 2>/dev/null; then
  version=${tag#v}
else
  base=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null || echo v0.0.0)
  stamp=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S 2>/dev/null || date -u +%Y%m%d%H%M%S)
  version="${base#v}+git$stamp.$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if git rev-parse --git-dir > /dev/null 2>&1 && ! git diff --quiet HEAD; then version="$version.dirty"; fi
fi
nfpm=$(command -v nfpm || true)
if [ -z "$nfpm" ]; then
  GOFLAGS= go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION"
  nfpm="$(go env GOPATH)/bin/nfpm"
fi
mkdir -p dist
rm -f dist/reactord* # this build's packages alone: a glob such as dist/reactord_*_amd64.deb names one
for arch in ${ARCHES:-amd64 arm64}; do
  CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -buildvcs=auto -trimpath -ldflags "-s -w" -o "dist/reactord-linux-$arch" ./cmd/reactord
  cp "dist/reactord-linux-$arch" dist/reactord # what nfpm.yaml packages
  for format in deb rpm; do
    GOARCH="$arch" VERSION="$version" "$nfpm" package --config packaging/nfpm.yaml --packager "$format" --target dist/
  done
done
rm -f dist/reactord
ls -l dist/
