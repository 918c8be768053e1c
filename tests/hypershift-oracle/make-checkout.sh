#!/usr/bin/env bash
# Makes a HyperShift checkout for the oracle: make-checkout.sh MIRROR_OR_URL DEST [BRANCH]
# (default branch release-4.22). Idempotent: an existing DEST on that branch is left as it is.
#
# A mirror may lack the blobs of its largest files (this workplace's does: three vendored files,
# among them vendor/github.com/IBM/vpc-go-sdk/vpcv1/vpc_v1.go and
# vendor/github.com/aws/aws-sdk-go-v2/service/ec2/deserializers.go), so a plain `git clone` fails to
# check out. This leaves exactly those files out with a sparse checkout; build.sh then compiles the
# two Go ones from compile-only stubs (see README.md).
set -euo pipefail
src=${1:?usage: make-checkout.sh MIRROR_OR_URL DEST [BRANCH]}
dest=${2:?usage: make-checkout.sh MIRROR_OR_URL DEST [BRANCH]}
branch=${3:-release-4.22}

if [ -d "$dest/.git" ] && [ "$(git -C "$dest" rev-parse --abbrev-ref HEAD)" = "$branch" ] && [ -f "$dest/go.mod" ]; then
  echo "$dest: already a checkout of $branch at $(git -C "$dest" rev-parse HEAD)"
  exit 0
fi
git clone --quiet --no-checkout --branch "$branch" "$src" "$dest"
missing=$(git -C "$dest" ls-tree -r HEAD | awk '$2=="blob"{print $3}' |
  git -C "$dest" cat-file --batch-check 2>/dev/null | awk '$2=="missing"{print $1}' || true)
patterns=('/*')
if [ -n "$missing" ]; then
  while read -r sha; do
    path=$(git -C "$dest" ls-tree -r HEAD | awk -v s="$sha" '$3==s{print $4}')
    echo "make-checkout.sh: blob of $path is absent from $src: leaving it out" >&2
    patterns+=("!/$path")
  done <<<"$missing"
  # (git complains about the absent blobs while it sets the sparse patterns; the checkout is complete.)
  git -C "$dest" sparse-checkout set --no-cone "${patterns[@]}" 2> >(grep -v "invalid object" >&2)
fi
git -C "$dest" checkout --quiet "$branch"
echo "$dest: $branch at $(git -C "$dest" rev-parse HEAD)"
