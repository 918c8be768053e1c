#!/bin/sh
# Build the hcp-workflow image in one command: a release build, the root filesystem staged
# from this machine (bin/container-rootfs.sh), then `podman build` of bin/Containerfile.
#
#   bin/build-image.sh [TAG]        (default localhost/hcp-workflow:<version>)
#
# Needs cargo, podman with runc, binutils (objcopy) and ca-certificates. Prints the tag last.
set -eu
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
tag=${1:-localhost/hcp-workflow:$version}
target=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release --locked -p hcp-workflow
bin/container-rootfs.sh "$target/release/hcp-workflow" "$target/image-rootfs"
podman build --runtime runc -f bin/Containerfile -t "$tag" "$target/image-rootfs"
echo "$tag"
