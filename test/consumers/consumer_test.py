#!/usr/bin/env python3
"""Builds and runs test/consumers/project/consumer.cpp the way a user of QTL would.

usage: consumer_test.py meson|cmake|pkgconfig SOURCE_ROOT

  meson      the consumer pulls QTL in as a Meson subproject (subprojects/qtl -> SOURCE_ROOT)
  cmake      QTL is installed into a scratch prefix; the consumer uses find_package(qtl) -> qtl::qtl, qtl::io
  pkgconfig  QTL is installed into a scratch prefix; the consumer is compiled with `pkg-config --cflags qtl-io`
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

mode, root = sys.argv[1], pathlib.Path(sys.argv[2]).resolve()
project = root / "test" / "consumers" / "project"


def run(*cmd, env=None, cwd=None):
    print("+", " ".join(str(c) for c in cmd), flush=True)
    r = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout[-6000:])
    if r.returncode != 0:
        sys.exit(f"consumer_test ({mode}): command failed with exit code {r.returncode}")
    return r.stdout


def install_qtl(tmp):
    """Configures QTL with nothing but its headers and package files, and installs it into tmp/prefix."""
    prefix = tmp / "prefix"
    run("meson", "setup", tmp / "qtl-build", root, f"--prefix={prefix}", "-Dtests=false",
        "-Dbenchmarks=disabled", "-Dexamples=false", "-Dtool=disabled", "-Dcuda=disabled")
    run("meson", "install", "-C", tmp / "qtl-build", "--quiet")
    for must in ["include/qtl/qtl.hpp", "share/pkgconfig/qtl.pc", "share/pkgconfig/qtl-io.pc",
                 "share/cmake/qtl/qtlConfig.cmake", "share/cmake/qtl/qtlConfigVersion.cmake"]:
        if not (prefix / must).is_file():
            sys.exit(f"consumer_test ({mode}): {must} was not installed")
    return prefix


with tempfile.TemporaryDirectory(prefix="qtl-consumer-") as t:
    tmp = pathlib.Path(t)
    src = tmp / "consumer"
    shutil.copytree(project, src)
    env = dict(os.environ)
    if mode == "meson":
        (src / "subprojects").mkdir()
        (src / "subprojects" / "qtl").symlink_to(root)
        run("meson", "setup", tmp / "b", src, "-Dqtl:tool=disabled", "-Dqtl:cuda=disabled")
        run("meson", "compile", "-C", tmp / "b")
        exe = tmp / "b" / "consumer"
    elif mode == "cmake":
        prefix = install_qtl(tmp)
        run("cmake", "-S", src, "-B", tmp / "b", f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release")
        run("cmake", "--build", tmp / "b")
        exe = tmp / "b" / "consumer"
    elif mode == "pkgconfig":
        prefix = install_qtl(tmp)
        env["PKG_CONFIG_PATH"] = str(prefix / "share" / "pkgconfig")
        flags = run("pkg-config", "--cflags", "--libs", "qtl-io", env=env).split()
        run("c++", "-Wall", "-Wextra", "-Werror", *flags, src / "consumer.cpp", "-o", tmp / "consumer-pkgconfig")
        exe = tmp / "consumer-pkgconfig"
    else:
        sys.exit(f"unknown mode {mode!r}")
    out = run(exe)
    if "round trip ok" not in out:
        sys.exit(f"consumer_test ({mode}): unexpected output")
    print(f"consumer_test ({mode}): OK")
