#!/bin/sh
# Fails when a C++ file of the project differs from what clang-format makes of
# it (.clang-format at the root), naming each such file; nothing else
# enforces the style. `tests/format/check_format.sh ROOT --fix` rewrites them.
set -eu
root=$1
command -v clang-format >/dev/null ||
  { echo "clang-format not found: scripts/setup --test installs it" >&2; exit 1; }
cd "$root"
files=$(find apps bench core libcheckpoint libsupervisor tests -name '*.cpp' -o -name '*.hpp' -o -name '*.h' | sort)
[ -n "$files" ] || { echo "no C++ files found under $root" >&2; exit 1; }
if [ "${2:-}" = --fix ]; then
  echo "$files" | xargs clang-format -i
  exit 0
fi
# One process for every file; --Werror turns each difference into an error
# that names the file and line.
if ! echo "$files" | xargs clang-format --dry-run --Werror; then
  echo "not formatted as clang-format would: run tests/format/check_format.sh . --fix" >&2
  exit 1
fi
echo "$(echo "$files" | wc -l) C++ files formatted"
