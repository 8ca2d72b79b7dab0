#!/usr/bin/env node
// devboy's npm launcher: runs the prebuilt binary of this platform, which
// npm installed as one of the package's optional dependencies
// (@devboy/<os>-<cpu>), with this process's arguments, standard streams and
// exit status. DEVBOY_BINARY names another binary to run instead.
"use strict";

const { spawn } = require("node:child_process");
const path = require("node:path");

const PLATFORMS = {
  "linux-x64": "@devboy/linux-x64",
  "linux-arm64": "@devboy/linux-arm64",
  "darwin-x64": "@devboy/darwin-x64",
  "darwin-arm64": "@devboy/darwin-arm64",
  "win32-x64": "@devboy/win32-x64",
};

function binary() {
  if (process.env.DEVBOY_BINARY) return process.env.DEVBOY_BINARY;
  const key = `${process.platform}-${process.arch}`;
  const pkg = PLATFORMS[key];
  if (!pkg) {
    throw new Error(
      `devboy has no prebuilt binary for ${key}; build it from source: cargo install --git <repository> devboy`
    );
  }
  const exe = process.platform === "win32" ? "devboy.exe" : "devboy";
  try {
    return require.resolve(`${pkg}/bin/${exe}`);
  } catch {
    throw new Error(
      `the package ${pkg} (devboy's binary for ${key}) is not installed: ` +
        "reinstall without --no-optional / --omit=optional"
    );
  }
}

let exe;
try {
  exe = binary();
} catch (error) {
  process.stderr.write(`devboy: ${error.message}\n`);
  process.exit(1);
}

const child = spawn(exe, process.argv.slice(2), { stdio: "inherit", windowsHide: true });
// A client stopping the launcher stops devboy the same way.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    if (child.exitCode === null) child.kill(signal);
  });
}
child.on("error", (error) => {
  process.stderr.write(`devboy: cannot run ${path.basename(exe)}: ${error.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
