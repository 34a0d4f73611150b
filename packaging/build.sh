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
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo unknown)}
version=${version#v}
# Package versions start with a digit; a build between releases sorts
# before the first one.
case "$version" in [0-9]*) ;; *) version="0.0.0~git.$version" ;; esac
nfpm=$(command -v nfpm || true)
if [ -z "$nfpm" ]; then
  GOFLAGS= go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION"
  nfpm="$(go env GOPATH)/bin/nfpm"
fi
mkdir -p dist
for arch in ${ARCHES:-amd64 arm64}; do
  CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -buildvcs=auto -trimpath -ldflags "-s -w" -o "dist/reactord-linux-$arch" ./cmd/reactord
  cp "dist/reactord-linux-$arch" dist/reactord # what nfpm.yaml packages
  for format in deb rpm; do
    GOARCH="$arch" VERSION="$version" "$nfpm" package --config packaging/nfpm.yaml --packager "$format" --target dist/
  done
done
rm -f dist/reactord
ls -l dist/
