#!/usr/bin/env bash
# Builds OpenKruise's kruise-manager, the benchmark's kruise contender
# (CloneSet, InPlaceIfPossible: the peer that pays the same readiness gate
# as the operator's in-place updates), into $KRUISE_DIR: the binary
# (manager) and the manifests the benchmark installs from (config/crd,
# config/webhook). Run by `make kruise`; `make bench` uses it.
#
# The module github.com/openkruise/kruise is built as the main module from
# its zip on the Go module proxy: its go.mod has replace directives, so
# `go install …@version` refuses. One local patch
# (hack/kruise/webhook-bind-host.patch): upstream binds the webhook server
# to 0.0.0.0, hard-coded in main.go, and everything the benchmark starts
# binds 127.0.0.1. The build takes about 10 minutes and 1.4 GB on 2 cores.
#
# Usage: KRUISE_VERSION=v1.8.2 KRUISE_DIR=bin/kruise-v1.8.2 hack/kruise.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
version=${KRUISE_VERSION:?set KRUISE_VERSION}
out=${KRUISE_DIR:?set KRUISE_DIR}
module=github.com/openkruise/kruise

zip=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Zip": "\(.*\)",$/\1/p')
if [[ ! -f $zip ]]; then
	echo "cannot download $module@$version from the Go module proxy" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unzip -q "$zip" -d "$work"
src=$work/$module@$version
chmod -R u+w "$src"
patch -s -d "$src" -p1 <"$root/hack/kruise/webhook-bind-host.patch"

mkdir -p "$out/config"
(cd "$src" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/manager.new" ./)
rm -rf "$out/config/crd" "$out/config/webhook"
cp -r "$src/config/crd" "$src/config/webhook" "$out/config/"
mv "$out/manager.new" "$out/manager"
