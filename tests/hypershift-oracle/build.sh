#!/usr/bin/env bash
# Builds the HyperShift oracle (tests/hypershift-oracle/go) inside a HyperShift checkout and prints
# the binary's path on its last line.
#
#   HCP_HYPERSHIFT_SRC        the checkout (required); must be on branch release-4.22
#   HCP_HYPERSHIFT_ANY_BRANCH=1  accept another branch
#   HCP_GO                    the go binary (default: /usr/lib/go-1.25/bin/go, else `go` on PATH)
#
# The binary is cached under <repo>/target/hypershift-oracle/<hypershift commit>-<source hash>/ and
# rebuilt only when the HyperShift commit or our sources change; GOCACHE is
# <repo>/target/hypershift-oracle/gocache, so only the first build is cold.
#
# Our main package is copied to $HCP_HYPERSHIFT_SRC/zz_hcp_oracle/ (untracked there) so that Go's
# internal/ and vendor rules let it import HyperShift's packages. The export shims (exports/*.go,
# which only re-export unexported HyperShift functions) and, where the checkout lacks them, the
# compile-only stubs of two vendored files (stubs/) are injected with `go build -overlay`: nothing
# of ours is written into HyperShift's own directories.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
src=${HCP_HYPERSHIFT_SRC:?HCP_HYPERSHIFT_SRC must name a HyperShift checkout}
src=$(cd "$src" && pwd)

[ -f "$src/go.mod" ] && grep -q '^module github.com/openshift/hypershift$' "$src/go.mod" ||
  { echo "build.sh: $src is not a HyperShift checkout" >&2; exit 2; }
branch=$(git -C "$src" rev-parse --abbrev-ref HEAD)
if [ "$branch" != "release-4.22" ] && [ "${HCP_HYPERSHIFT_ANY_BRANCH:-}" != "1" ]; then
  echo "build.sh: $src is on branch '$branch', not release-4.22 (what a 4.22 management cluster runs); set HCP_HYPERSHIFT_ANY_BRANCH=1 to use it anyway" >&2
  exit 2
fi
commit=$(git -C "$src" rev-parse HEAD)

go=${HCP_GO:-}
if [ -z "$go" ]; then
  for g in /usr/lib/go-1.25/bin/go /usr/lib/go-1.26/bin/go "$(command -v go || true)"; do
    [ -n "$g" ] && [ -x "$g" ] || continue
    v=$("$g" env GOVERSION 2>/dev/null | sed 's/^go//')
    # new enough when 1.25.3 sorts first (or equal)
    if [ -n "$v" ] && [ "$(printf '%s\n1.25.3\n' "$v" | sort -V | head -1)" = "1.25.3" ]; then
      go=$g; break
    fi
  done
fi
[ -n "$go" ] || { echo "build.sh: no Go >= 1.25.3 found: run tests/hypershift-oracle/install-go.sh (as root)" >&2; exit 2; }

hash=$(cd "$here" && cat go/*.go exports/*.go stubs/* build.sh | sha256sum | cut -c1-16)
out="$repo/target/hypershift-oracle/${commit:0:12}-$hash"
bin="$out/hcp-oracle"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
mkdir -p "$out"

# Our main package, inside the checkout (untracked there).
mkdir -p "$src/zz_hcp_oracle"
rm -f "$src/zz_hcp_oracle/"*.go
cp "$here/go/"*.go "$src/zz_hcp_oracle/"

# The overlay: export shims, and stubs for vendored files the checkout lacks.
ov="$out/overlay"
mkdir -p "$ov"
entries=()
cp "$here/exports/hostedcluster.go" "$ov/hostedcluster_export.go"
cp "$here/exports/nodepool.go" "$ov/nodepool_export.go"
entries+=("\"$src/hypershift-operator/controllers/hostedcluster/zz_hcp_oracle_export.go\": \"$ov/hostedcluster_export.go\"")
entries+=("\"$src/hypershift-operator/controllers/nodepool/zz_hcp_oracle_export.go\": \"$ov/nodepool_export.go\"")
vpc="$src/vendor/github.com/IBM/vpc-go-sdk/vpcv1/vpc_v1.go"
if [ ! -f "$vpc" ]; then
  cp "$here/stubs/vpcv1.go.stub" "$ov/vpc_v1.go"
  entries+=("\"$vpc\": \"$ov/vpc_v1.go\"")
  echo "build.sh: $vpc is absent from the checkout: using the compile-only stub stubs/vpcv1.go.stub" >&2
fi
ec2dir="$src/vendor/github.com/aws/aws-sdk-go-v2/service/ec2"
if [ ! -f "$ec2dir/deserializers.go" ]; then
  {
    sed -n '1,/^package/p' "$here/stubs/ec2_deserializers.go.head"
    echo
    echo 'import ('
    echo '	"context"'
    echo '	"errors"'
    echo
    echo '	"github.com/aws/smithy-go/middleware"'
    echo ')'
    echo
    echo 'var errHcpOracleStub = errors.New("hcp-oracle: the EC2 response deserializers are a compile-only stub")'
    grep -oh 'awsEc2query_deserializeOp[A-Za-z0-9_]*' "$ec2dir"/api_op_*.go | sort -u | while read -r t; do
      printf '\ntype %s struct{}\n\nfunc (*%s) ID() string { return "OperationDeserializer" }\n\nfunc (*%s) HandleDeserialize(context.Context, middleware.DeserializeInput, middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {\n\treturn middleware.DeserializeOutput{}, middleware.Metadata{}, errHcpOracleStub\n}\n' "$t" "$t" "$t"
    done
  } > "$ov/ec2_deserializers.go"
  entries+=("\"$ec2dir/deserializers.go\": \"$ov/ec2_deserializers.go\"")
  echo "build.sh: $ec2dir/deserializers.go is absent from the checkout: generating a compile-only stub" >&2
fi
{ echo '{"Replace": {'; (IFS=,; echo "${entries[*]}"); echo '}}'; } > "$ov/overlay.json"

export GOTOOLCHAIN=local GOFLAGS=-mod=vendor GOPROXY=off GOWORK=off CGO_ENABLED=0
export GOCACHE="$repo/target/hypershift-oracle/gocache" GOPATH="$repo/target/hypershift-oracle/gopath"
mkdir -p "$GOCACHE" "$GOPATH"
echo "build.sh: building the oracle against HyperShift $commit ($branch) with $("$go" env GOVERSION) (a cold build takes many minutes)" >&2
start=$(date +%s)
(cd "$src" && "$go" build -overlay "$ov/overlay.json" \
  -ldflags "-X main.hypershiftCommit=$commit -X main.hypershiftBranch=$branch -X main.oracleSourceHash=$hash -X main.hypershiftSrc=$src" \
  -o "$bin.tmp" ./zz_hcp_oracle)
mv "$bin.tmp" "$bin"
echo "build.sh: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
