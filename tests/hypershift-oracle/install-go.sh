#!/usr/bin/env bash
# Installs a Go toolchain >= 1.25.3 (what HyperShift release-4.22's go.mod asks for) on Debian 12
# (bookworm), whose own Go is 1.19. Only Debian's archive is used: trixie and trixie-backports are added as
# apt sources with a low pin (priority 100), so nothing else on the machine upgrades from them, and
# only the golang-1.2x-go packages (and what they strictly need) are taken from there.
#
# Idempotent: does nothing when a Go >= 1.25.3 is already installed under /usr/lib/go-1.2x.
# Prints the path of the `go` binary on its last line.
set -euo pipefail

want_major=1 want_minor=25 want_patch=3

have_go() { # prints a go binary that is new enough, if any
  local g v
  for g in /usr/lib/go-1.2[5-9]/bin/go /usr/lib/go-1.3[0-9]/bin/go; do
    [ -x "$g" ] || continue
    v=$("$g" env GOVERSION 2>/dev/null | sed 's/^go//') || continue
    IFS=. read -r a b c <<<"$v"
    c=${c:-0}; c=${c%%[!0-9]*}
    if (( a > want_major || (a == want_major && (b > want_minor || (b == want_minor && c >= want_patch))) )); then
      echo "$g"; return 0
    fi
  done
  return 1
}

if g=$(have_go); then echo "$g"; exit 0; fi

[ "$(id -u)" = 0 ] || { echo "install-go.sh: needs root (apt-get)" >&2; exit 1; }

src=/etc/apt/sources.list.d/hcp-oracle-go.sources
if [ ! -f "$src" ]; then
  cat >"$src" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
pin=/etc/apt/preferences.d/hcp-oracle-go
if [ ! -f "$pin" ]; then
  cat >"$pin" <<'PIN'
# Added by hcp-workflow tests/hypershift-oracle/install-go.sh: newer suites only for the Go toolchain.
Package: *
Pin: release n=trixie
Pin-Priority: 100

Package: *
Pin: release n=trixie-backports
Pin-Priority: 100
PIN
fi

apt-get update -qq
# golang-1.25-go first (the Go minor HyperShift release-4.22 names), else a newer one; >= 1.25.3.
pkg=""
for p in golang-1.25-go golang-1.26-go; do
  cand=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/{print $2}')
  if [ -n "$cand" ] && [ "$cand" != "(none)" ]; then
    if dpkg --compare-versions "$cand" ge 1.25.3; then pkg=$p; break; fi
  fi
done
[ -n "$pkg" ] || { echo "install-go.sh: no golang-1.2x-go >= 1.25.3 in Debian's suites" >&2; exit 1; }
# Which suite carries the candidate (so apt takes the package and its deps from there).
madison=$(apt-cache madison "$pkg")
suite=""
for s in trixie-backports trixie; do
  case "$madison" in *" $s/"*) suite=$s; break ;; esac
done
[ -n "$suite" ] || { echo "install-go.sh: $pkg is in no suite this script added" >&2; exit 1; }
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t "$suite" --no-install-recommends "$pkg" >&2
g=$(have_go) || { echo "install-go.sh: installed $pkg but no go >= 1.25.3 found" >&2; exit 1; }
echo "$g"
