#!/usr/bin/env bash
# The documentation's checks (the `docs` step of scripts/test.sh):
#   1. every relative link and #anchor in README.md, CONTRIBUTING.md,
#      SECURITY.md, docs/**/*.md and clients/*/README.md resolves
#      (scripts/check-links.py, after its self-test shows it can fail);
#   2. shellcheck on scripts/*.sh (installed by scripts/setup.sh). The step
#      bodies of scripts/test.sh are `bash -c '...'` on purpose, so SC2016
#      (no expansion in single quotes) is not reported for that file alone;
#   3. rustdoc for the whole workspace with warnings as errors (broken
#      intra-doc links included): RUSTDOCFLAGS="-D warnings" cargo doc
#      --workspace --no-deps --document-private-items (the docs are for
#      whoever works on the crates; links to private items are allowed);
#   4. no import circle among the files of any crate of the workspace
#      (scripts/check-import-cycles.py, after its self-test);
#   5. every `pub` item of the daemon library is named outside it, or is
#      required by the interface of one that is (scripts/pub-surface.py):
#      the rest must be `pub(crate)`; and at least 80% of them are named
#      outside (an interface must not drag in types nobody writes);
#   6. every production Rust file over 400 lines is listed, with its
#      reason, in CONTRIBUTING.md (scripts/check-file-sizes.py).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

echo "--- links"
python3 scripts/check-links.py --self-test
python3 scripts/check-links.py

echo "--- shellcheck"
if ! command -v shellcheck >/dev/null 2>&1; then
  echo "check-docs: shellcheck not found (scripts/setup.sh installs the Debian package)" >&2
  exit 1
fi
others=()
for script in scripts/*.sh; do
  [ "$script" = scripts/test.sh ] || others+=("$script")
done
shellcheck "${others[@]}"
shellcheck --exclude=SC2016 scripts/test.sh
echo "shellcheck: $((${#others[@]} + 1)) scripts, no findings"

echo "--- rustdoc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --document-private-items

echo "--- import circles"
python3 scripts/check-import-cycles.py --self-test
python3 scripts/check-import-cycles.py crates/*/src tools/*/src

echo "--- file sizes"
python3 scripts/check-file-sizes.py --self-test
python3 scripts/check-file-sizes.py

echo "--- pub surface"
python3 scripts/pub-surface.py --min 100 --named-min 80

echo "docs: 6 passed, 0 failed"
