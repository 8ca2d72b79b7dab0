#!/usr/bin/env python3
"""Packages a built devboy binary the way MCP servers are installed.

    python3 packaging/build.py --binary target/release/devboy [--target TRIPLE] [--out DIR]

Writes to DIR (default target/packages):
  - devboy-<version>.tgz: the npm launcher package `devboy`, which runs the
    binary of its platform's optional dependency (packaging/npm/devboy);
  - devboy-<os>-<cpu>-<version>.tgz: that platform's package
    `@devboy/<os>-<cpu>`, the binary in bin/;
  - devboy-<version>-py3-none-<platform>.whl: a wheel whose only content is
    the binary as a script (installed on PATH by pip, pipx and uv), the
    layout maturin's `bindings = "bin"` gives.

The target triple (default: this machine's, from `rustc -vV`) names the
npm os/cpu and the wheel's platform tag; a Linux wheel's manylinux tag is
the newest glibc symbol version the binary needs. Only the standard library
is used. The release workflow (.github/workflows/release.yml) runs this for
every platform and publishes the files; tests/packages.rs installs them from
the files, with no Rust toolchain on PATH.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "packaging" / "npm" / "devboy"
DESCRIPTION = "MCP middleware that makes every tool result cost the model fewer tokens"

# Rust target triple -> (npm os, npm cpu, wheel platform tag or None for Linux).
TARGETS = {
    "x86_64-unknown-linux-gnu": ("linux", "x64", None),
    "aarch64-unknown-linux-gnu": ("linux", "arm64", None),
    "x86_64-apple-darwin": ("darwin", "x64", "macosx_10_12_x86_64"),
    "aarch64-apple-darwin": ("darwin", "arm64", "macosx_11_0_arm64"),
    "x86_64-pc-windows-msvc": ("win32", "x64", "win_amd64"),
}
LINUX_ARCH = {"x64": "x86_64", "arm64": "aarch64"}


def version() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    section = text[text.index("[workspace.package]") :]
    return re.search(r'^version\s*=\s*"([^"]+)"', section, re.M).group(1)


def host_triple() -> str:
    out = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    return re.search(r"^host: (\S+)", out, re.M).group(1)


def glibc_needed(binary: bytes) -> tuple[int, int]:
    """The newest GLIBC_2.N symbol version the binary names (its dynamic
    string table lists each version it needs)."""
    versions = {(int(a), int(b)) for a, b in re.findall(rb"GLIBC_(\d+)\.(\d+)", binary)}
    return max(versions) if versions else (2, 17)


def tar_package(out: Path, files: dict[str, tuple[bytes, int]]) -> None:
    """An npm tarball: every entry under package/, reproducible."""
    with tarfile.open(out, "w:gz", compresslevel=6) as tar:
        for name, (data, mode) in sorted(files.items()):
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            info.mode = mode
            info.mtime = 499162500  # npm's own fixed date (1985-10-26)
            tar.addfile(info, io.BytesIO(data))


def npm_packages(binary: bytes, exe: str, os_: str, cpu: str, ver: str, out: Path) -> list[Path]:
    platform = f"{os_}-{cpu}"
    platform_name = f"@devboy/{platform}"
    platform_manifest = {
        "name": platform_name,
        "version": ver,
        "description": f"devboy's binary for {platform} (installed by the `devboy` package)",
        "license": "MIT",
        "os": [os_],
        "cpu": [cpu],
        "files": [f"bin/{exe}"],
        "preferUnplugged": True,
    }
    if os_ == "linux":
        platform_manifest["libc"] = ["glibc"]
    platform_tgz = out / f"devboy-{platform}-{ver}.tgz"
    tar_package(
        platform_tgz,
        {
            "package.json": (json.dumps(platform_manifest, indent=2).encode() + b"\n", 0o644),
            f"bin/{exe}": (binary, 0o755),
            "LICENSE": ((ROOT / "LICENSE").read_bytes(), 0o644),
        },
    )
    launcher_manifest = {
        "name": "devboy",
        "version": ver,
        "description": DESCRIPTION,
        "license": "MIT",
        "bin": {"devboy": "bin/devboy.js"},
        "files": ["bin/devboy.js"],
        "engines": {"node": ">=18"},
        "optionalDependencies": {
            f"@devboy/{o}-{c}": ver for (o, c, _) in TARGETS.values()
        },
    }
    launcher_tgz = out / f"devboy-{ver}.tgz"
    tar_package(
        launcher_tgz,
        {
            "package.json": (json.dumps(launcher_manifest, indent=2).encode() + b"\n", 0o644),
            "bin/devboy.js": ((LAUNCHER / "bin" / "devboy.js").read_bytes(), 0o755),
            "LICENSE": ((ROOT / "LICENSE").read_bytes(), 0o644),
            "README.md": (
                b"# devboy\n\n" + DESCRIPTION.encode() + b".\n\n"
                b"    claude mcp add devboy -- npx -y devboy mcp\n",
                0o644,
            ),
        },
    )
    return [platform_tgz, launcher_tgz]


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def wheel(binary: bytes, exe: str, tag: str, ver: str, out: Path) -> Path:
    dist = f"devboy-{ver}"
    files = {
        f"{dist}.data/scripts/{exe}": (binary, 0o755),
        f"{dist}.dist-info/METADATA": (
            (
                "Metadata-Version: 2.1\n"
                "Name: devboy\n"
                f"Version: {ver}\n"
                f"Summary: {DESCRIPTION}\n"
                "License: MIT\n"
                "Requires-Python: >=3.8\n"
                "Description-Content-Type: text/markdown\n\n"
                f"# devboy\n\n{DESCRIPTION}.\n\n    claude mcp add devboy -- uvx devboy mcp\n"
            ).encode(),
            0o644,
        ),
        f"{dist}.dist-info/WHEEL": (
            (
                "Wheel-Version: 1.0\n"
                "Generator: devboy packaging/build.py\n"
                "Root-Is-Purelib: false\n"
                f"Tag: py3-none-{tag}\n"
            ).encode(),
            0o644,
        ),
        f"{dist}.dist-info/licenses/LICENSE": ((ROOT / "LICENSE").read_bytes(), 0o644),
    }
    record_name = f"{dist}.dist-info/RECORD"
    record = "\n".join([record_line(n, d) for n, (d, _) in files.items()] + [f"{record_name},,", ""])
    files[record_name] = (record.encode(), 0o644)
    path = out / f"{dist}-py3-none-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for name, (data, mode) in files.items():
            info = zipfile.ZipInfo(name, date_time=(1985, 10, 26, 8, 15, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, type=Path)
    parser.add_argument("--target", help="Rust target triple (default: this machine's)")
    parser.add_argument("--out", type=Path, default=ROOT / "target" / "packages")
    args = parser.parse_args()
    triple = args.target or host_triple()
    if triple not in TARGETS:
        print(f"build.py: no package for target {triple}; known: {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    os_, cpu, tag = TARGETS[triple]
    binary = args.binary.read_bytes()
    exe = "devboy.exe" if os_ == "win32" else "devboy"
    if tag is None:
        major, minor = glibc_needed(binary)
        tag = f"manylinux_{major}_{minor}_{LINUX_ARCH[cpu]}"
    ver = version()
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    made = npm_packages(binary, exe, os_, cpu, ver, args.out) + [wheel(binary, exe, tag, ver, args.out)]
    for path in made:
        print(f"{path}  {path.stat().st_size / 1e6:.1f} MB")
    print(f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
