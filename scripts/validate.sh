#!/usr/bin/env bash
# Formats the sources with swift-format (.swift-format, as swift-nio's: 4 spaces, 120 columns) and fails
# when that changed anything: run it before committing; CI-style check with `scripts/validate.sh --check`.
# Then builds with the explicit import check: a module that imports a target it does not declare is an
# error, so the module graph in Package.swift stays the architecture (docs/architecture.md draws it).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests --explicit-target-dependency-import-check error
mapfile -t files < <(git ls-files '*.swift' | grep -v '^Package.swift$')
if [ "${1:-}" = "--check" ]; then
    swift format lint --strict --parallel "${files[@]}"
else
    swift format format --in-place --parallel "${files[@]}"
    git diff --quiet -- "${files[@]}" || { echo "swift-format changed files: review and commit them" >&2; exit 1; }
fi
