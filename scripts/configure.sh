# Sourced by the scripts that build (test.sh, demo.sh) from the repository root: installs the missing
# Debian packages (as root), puts nvcc on PATH where it is installed (Meson finds it only there) and
# configures $builddir (QTL_BUILD_DIR, default build/) once, with -Dwerror=true and QTL_SETUP_ARGS
# (CI passes -Ddebug=false: the same -O2 code without debug info, a third less compile time).
scripts/setup-deps.sh
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
builddir=${QTL_BUILD_DIR:-build}
if [ ! -f "$builddir/build.ninja" ]; then
  # shellcheck disable=SC2086
  meson setup "$builddir" -Dwerror=true ${QTL_SETUP_ARGS:-}
fi
