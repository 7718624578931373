#!/usr/bin/env python3
"""A wheel carrying stockade's static binary and its Python SDK together, the way ruff and uv ship
theirs: `pip install stockade-*.whl` puts `stockade` on the virtual environment's PATH and
`import stockade` in it. Written with the standard library alone (a wheel is a zip with a RECORD
of every file's SHA-256): no build backend is needed to pack a binary that is already built.

Usage: wheel.py --binary PATH --sdk python/ --out DIR
"""
import argparse
import base64
import hashlib
import os
import re
import stat
import sys
import zipfile

# A static binary runs on any x86_64 Linux; manylinux2014 (glibc 2.17) is the oldest tag pip
# still matches on every current distribution.
TAG = "py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64"


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def project(pyproject: str) -> dict:
    """name, version, description, requires-python and dependencies from pyproject.toml."""
    try:
        import tomllib  # Python >= 3.11

        return tomllib.loads(pyproject)["project"]
    except ImportError:
        out = {}
        for key in ("name", "version", "description", "requires-python"):
            m = re.search(rf'^{key}\s*=\s*"([^"]*)"', pyproject, re.M)
            if m:
                out[key] = m.group(1)
        m = re.search(r"^dependencies\s*=\s*\[([^\]]*)\]", pyproject, re.M)
        out["dependencies"] = re.findall(r'"([^"]+)"', m.group(1)) if m else []
        return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--sdk", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    meta = project(open(os.path.join(a.sdk, "pyproject.toml"), encoding="utf-8").read())
    name, version = meta["name"], meta["version"]
    dist = f"{name}-{version}.dist-info"
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, f"{name}-{version}-{TAG}.whl")
    files = []  # (archive name, bytes, executable)
    pkg = os.path.join(a.sdk, "src", name)
    for root, _, names in sorted(os.walk(pkg)):
        for n in sorted(names):
            if n.endswith(".pyc") or "__pycache__" in root:
                continue
            full = os.path.join(root, n)
            rel = os.path.relpath(full, os.path.join(a.sdk, "src"))
            files.append((rel.replace(os.sep, "/"), open(full, "rb").read(), False))
    files.append((f"{name}-{version}.data/scripts/stockade", open(a.binary, "rb").read(), True))
    readme = open(os.path.join(a.sdk, "README.md"), encoding="utf-8").read()
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        f"Summary: {meta.get('description', '')} (with the stockade binary)",
        "License: Apache-2.0",
        f"Requires-Python: {meta.get('requires-python', '>=3.9')}",
        *[f"Requires-Dist: {d}" for d in meta.get("dependencies", [])],
        # The optional extras (the agent frameworks, the tests'), as pyproject.toml names them.
        *[
            line
            for extra, deps in meta.get("optional-dependencies", {}).items()
            for line in [f"Provides-Extra: {extra}", *[f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]]
        ],
        "Description-Content-Type: text/markdown",
        "",
        readme,
    ]
    files.append((f"{dist}/METADATA", "\n".join(metadata).encode(), False))
    wheel = f"Wheel-Version: 1.0\nGenerator: stockade xtask wheel\nRoot-Is-Purelib: false\nTag: {TAG.split('.')[0]}\n"
    for extra in TAG.split(".")[1:]:
        wheel += f"Tag: py3-none-{extra}\n"
    files.append((f"{dist}/WHEEL", wheel.encode(), False))
    record = "".join(f"{n},{digest(b)},{len(b)}\n" for n, b, _ in files) + f"{dist}/RECORD,,\n"
    files.append((f"{dist}/RECORD", record.encode(), False))
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for n, b, exe in files:
            info = zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = ((0o755 if exe else 0o644) | stat.S_IFREG) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, b)
    os.replace(tmp, path)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
