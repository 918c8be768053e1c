#!/bin/sh
# Stage the root filesystem of the hcp-workflow image (bin/Containerfile) from this machine:
# the binary (stripped of debug info), every shared library `ldd` lists for it (and the
# dynamic loader), the CA bundle, /etc/passwd and /etc/group naming uid 65532, and /tmp.
#
#   bin/container-rootfs.sh BINARY DIR
#
# DIR is emptied first. Needs ldd, objcopy (binutils) and /etc/ssl/certs/ca-certificates.crt
# (Debian: ca-certificates).
set -eu
bin=${1:?usage: bin/container-rootfs.sh BINARY DIR}
dir=${2:?usage: bin/container-rootfs.sh BINARY DIR}
[ -x "$bin" ] || { echo "error: $bin is not an executable (build it: cargo build --release -p hcp-workflow)" >&2; exit 2; }
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || { echo "error: $ca missing (apt-get install ca-certificates)" >&2; exit 2; }
rm -rf "$dir"
mkdir -p "$dir/usr/local/bin" "$dir/etc/ssl/certs" "$dir/tmp"
chmod 1777 "$dir/tmp"
objcopy --strip-debug "$bin" "$dir/usr/local/bin/hcp-workflow"
chmod 0755 "$dir/usr/local/bin/hcp-workflow"
# `ldd` prints `name => /path (addr)` for libraries and `/path (addr)` for the loader.
ldd "$bin" | awk '/=> \// {print $3} /^[[:space:]]*\// {print $1}' | sort -u | while read -r lib; do
    mkdir -p "$dir$(dirname "$lib")"
    cp -L "$lib" "$dir$lib"
done
cp "$ca" "$dir/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nhcp:x:65532:65532:hcp-workflow:/tmp:/sbin/nologin\n' > "$dir/etc/passwd"
printf 'root:x:0:\nhcp:x:65532:\n' > "$dir/etc/group"
# glibc resolves names from /etc/hosts, then DNS (the runtime mounts hosts and resolv.conf).
printf 'hosts: files dns\n' > "$dir/etc/nsswitch.conf"
echo "staged $(du -sh "$dir" | cut -f1) in $dir:"
find "$dir" -type f | sed "s|^$dir||" | sort
