#!/usr/bin/env bash
# k8s-validate.sh - offline checks of contrib/kubernetes/: YAML lint and Kubernetes schema validation.
#
# usage: xtask/k8s-validate.sh
#
# Installs yamllint and kubernetes-validate (which bundles the Kubernetes JSON schemas; no cluster
# and no network are used after the install) into target/k8s-venv on the first run, then:
#   1. yamllint -d relaxed contrib/kubernetes/
#   2. kubernetes-validate --strict -k 1.36.0 contrib/kubernetes/stockade.yaml replicas.yaml
#      (--strict: unknown fields are errors); `haproxy -c` of contrib/haproxy/haproxy.cfg and of
#      replicas.yaml's balancer (when haproxy is here);
#   3. self-test: the validator must reject copies of that (now known valid) manifest with a
#      misspelled field, naming it (otherwise a broken validator would pass anything).
# Exit code: 0 when everything passes, non-zero otherwise.
# Not checked (the schemas are structural): cross-field rules such as "procMount: Unmasked needs
# hostUsers: false", that the seccomp profile exists on the nodes, or what serve.toml says.
set -euo pipefail
cd "$(dirname "$0")/.."

K8S_VERSION=1.36.0
VALIDATE_PKG=kubernetes-validate==1.37.0
VENV=target/k8s-venv
MANIFEST=contrib/kubernetes/stockade.yaml
REPLICAS=contrib/kubernetes/replicas.yaml

if [[ ! -x "$VENV/bin/kubernetes-validate" || ! -x "$VENV/bin/yamllint" ]]; then
    echo "== creating $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$VALIDATE_PKG" yamllint
fi
echo "== $("$VENV/bin/yamllint" --version), kubernetes-validate $("$VENV/bin/python" -m pip show kubernetes-validate 2>/dev/null | sed -n 's/^Version: //p'), schemas for Kubernetes $K8S_VERSION"

echo "== yamllint -d relaxed contrib/kubernetes/"
"$VENV/bin/yamllint" -d relaxed contrib/kubernetes/

echo "== kubernetes-validate --strict -k $K8S_VERSION $MANIFEST $REPLICAS"
"$VENV/bin/kubernetes-validate" --strict -k "$K8S_VERSION" "$MANIFEST" "$REPLICAS"

# The balancer's configurations: contrib/haproxy's and the one in the replicas' ConfigMap.
if command -v haproxy >/dev/null || [[ -x /usr/sbin/haproxy ]]; then
    HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
    echo "== haproxy -c: contrib/haproxy/haproxy.cfg and $REPLICAS's ConfigMap"
    "$HAPROXY" -c -q -f contrib/haproxy/haproxy.cfg
    cfg=$(mktemp)
    "$VENV/bin/python" -c 'import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d.get("kind") == "ConfigMap" and "haproxy.cfg" in d.get("data", {}):
        sys.stdout.write(d["data"]["haproxy.cfg"])' "$REPLICAS" >"$cfg"
    "$HAPROXY" -c -q -f "$cfg"
    rm -f "$cfg"
else
    echo "== haproxy -c: skipped (no haproxy here: apt-get install haproxy)"
fi

echo "== self-test: copies of the (valid) manifest with a misspelled field must be rejected"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# An unknown field in the pod spec (hostUsers -> hostUser) and one in the container's
# securityContext (procMount -> procMounts), one at a time; each must be reported by name.
for typo in hostUsers:hostUser procMount:procMounts; do
    right=${typo%%:*} wrong=${typo##*:}
    sed "s/^\( *\)$right:/\1$wrong:/" "$MANIFEST" >"$tmp/typo.yaml"
    if cmp -s "$MANIFEST" "$tmp/typo.yaml"; then
        echo "self-test: no '$right:' line in $MANIFEST to misspell" >&2
        exit 1
    fi
    if "$VENV/bin/kubernetes-validate" --strict --quiet -k "$K8S_VERSION" "$tmp/typo.yaml" >"$tmp/out" 2>&1 \
        || ! grep -q "'$wrong' was unexpected" "$tmp/out"; then
        cat "$tmp/out" >&2
        echo "self-test FAILED: the validator did not report the unknown field '$wrong'" >&2
        exit 1
    fi
    grep "'$wrong' was unexpected" "$tmp/out" | sed 's/.*against version [0-9.]*: /   rejected as expected: /'
done

echo "== all checks passed"
