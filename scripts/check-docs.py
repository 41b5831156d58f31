#!/usr/bin/env python3
"""Runs every shell block of README.md and docs/ as a reader following the page would.

Each page's blocks run in order in one bash process (so a variable set by one block is there for the next), with
`set -euo pipefail`, in a fresh temporary directory that stands in for the machine:

- `profile-escrow` is on PATH (PROFILE_ESCROW_BIN, default .build/debug/profile-escrow);
- the absolute paths the docs use for production (`/secure/`, `/var/lib/profile-escrow/`) are read inside that
  directory, so nothing outside it is written;
- `curl` fails on an HTTP error answer (`--fail-with-body`), so a documented request must succeed;
- a line that starts `profile-escrow serve` runs in the background until the page ends (a serve started before it
  on the page is stopped first), and the next line runs once its `/healthz` answers.

A block the check cannot run here (a build, the test suite, a benchmark, a fuzzing run: what CI runs itself or what
takes many minutes) is marked in the Markdown, on the line before its fence, with an HTML comment the reader does
not see: `<!-- docs-check: skip: why -->`. Everything else must run as written. What the page's text asks the
reader to have done first (save the profile JSON shown above as `profile.json`) is marked the same way, as a
command the check runs before the block: `<!-- docs-check: before: command -->`.

Usage: scripts/check-docs.py [FILE.md ...]   Prints one line a block (ok, skip, FAIL) and exits 1 on a failure.
       DOCS_CHECK_VERBOSE=1 shows what the commands print.
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^```(sh|bash|shell)\s*$")
SKIP = re.compile(r"^<!--\s*docs-check:\s*skip:\s*(.+?)\s*-->\s*$")
BEFORE = re.compile(r"^<!--\s*docs-check:\s*before:\s*(.+?)\s*-->\s*$")
PAGE_SECONDS = 180

PRELUDE = r"""
set -euo pipefail
# A documented request that answers an HTTP error fails its block (the answer's body is still shown).
curl() { command curl --fail-with-body "$@"; }
docs_check_pids=()
docs_check_stop_serve() {
    for pid in "${docs_check_pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    docs_check_pids=()
}
trap docs_check_stop_serve EXIT
# `profile-escrow serve …` in the background; returns once its /healthz answers (it fails the page otherwise).
docs_check_serve() {
    docs_check_stop_serve
    local port=8080 previous=""
    for argument in "$@"; do
        [ "$previous" = "--port" ] && port=$argument
        previous=$argument
    done
    "$@" >>"$DOCS_CHECK_DIR/serve.log" 2>&1 &
    docs_check_pids+=($!)
    for _ in $(seq 1 100); do
        command curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" && return 0
        kill -0 "${docs_check_pids[-1]}" 2>/dev/null || { echo "serve exited: $(tail -n 3 "$DOCS_CHECK_DIR/serve.log")" >&2; return 1; }
        sleep 0.1
    done
    echo "serve did not answer /healthz on port $port within 10 s" >&2
    return 1
}
"""


def blocks(path):
    """(line number, skip reason or None, commands to run first, text) of each shell block of a Markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    found = []
    index = 0
    while index < len(lines):
        if FENCE.match(lines[index]):
            end = index + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            reason, before = None, []
            above = index - 1
            while above >= 0 and lines[above].startswith("<!-- docs-check:"):
                if SKIP.match(lines[above]):
                    reason = SKIP.match(lines[above]).group(1)
                elif BEFORE.match(lines[above]):
                    before.insert(0, BEFORE.match(lines[above]).group(1))
                else:
                    raise SystemExit(f"{path}:{above + 1}: unknown docs-check marker")
                above -= 1
            found.append((index + 1, reason, before, "\n".join(lines[index + 1 : end])))
            index = end
        index += 1
    return found


def rewrite(text, sandbox):
    """The block as it runs here: production paths inside the sandbox, `serve` in the background."""
    text = text.replace("/secure/", sandbox + "/secure/")
    text = text.replace("/var/lib/profile-escrow/", sandbox + "/var/lib/profile-escrow/")
    out = []
    for line in text.split("\n"):
        if line.startswith("profile-escrow serve"):
            line = "docs_check_serve " + line
        out.append(line)
    return "\n".join(out)


def run_page(path, binary):
    """Runs a page's blocks; returns [(status, line, detail)]."""
    found = blocks(path)
    results = []
    runnable = [(line, "\n".join(before + [text])) for (line, reason, before, text) in found if reason is None]
    for line, reason, _, _ in found:
        if reason is not None:
            results.append(("skip", line, reason))
    if not runnable:
        return results
    sandbox = tempfile.mkdtemp(prefix="profile-escrow-docs.")
    try:
        for directory in ("secure", "var/lib/profile-escrow", "home"):
            os.makedirs(os.path.join(sandbox, directory), mode=0o700, exist_ok=True)
        bindir = os.path.join(sandbox, "bin")
        os.makedirs(bindir)
        os.symlink(binary, os.path.join(bindir, "profile-escrow"))
        script = [PRELUDE]
        for line, text in runnable:
            script.append(f'echo "docs-check-block {line}" >&2\n')
            script.append(rewrite(text, sandbox) + "\n")
            script.append(f'echo "docs-check-done {line}" >&2\n')
        script_path = os.path.join(sandbox, "page.sh")
        open(script_path, "w", encoding="utf-8").write("".join(script))
        environment = {
            key: value for key, value in os.environ.items() if not key.startswith("PROFILE_ESCROW_")
        }
        environment.update(
            PATH=bindir + os.pathsep + environment.get("PATH", ""),
            HOME=os.path.join(sandbox, "home"),
            DOCS_CHECK_DIR=sandbox,
        )
        # A session of its own, so that a page that times out is stopped with everything it started (`serve`).
        process = subprocess.Popen(
            ["bash", script_path],
            cwd=sandbox,
            env=environment,
            stdout=None if os.environ.get("DOCS_CHECK_VERBOSE") else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _, stderr = process.communicate(timeout=PAGE_SECONDS)
            code = process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            _, stderr = process.communicate()
            code = f"timeout after {PAGE_SECONDS} s"
        done = set(int(n) for n in re.findall(r"^docs-check-done (\d+)$", stderr, re.M))
        started = [int(n) for n in re.findall(r"^docs-check-block (\d+)$", stderr, re.M)]
        failed = started[-1] if started and started[-1] not in done and code != 0 else None
        tail = "\n".join(l for l in stderr.strip().split("\n") if not l.startswith("docs-check-"))[-600:]
        for line, _ in runnable:
            if line in done:
                results.append(("ok", line, ""))
            elif line == failed:
                results.append(("FAIL", line, f"exit {code}: {tail}"))
            else:
                results.append(("FAIL", line, "not reached" if failed else f"exit {code}: {tail}"))
    finally:
        shutil.rmtree(sandbox, ignore_errors=True)
    return sorted(results, key=lambda result: result[1])


def main():
    binary = os.path.abspath(os.environ.get("PROFILE_ESCROW_BIN", os.path.join(ROOT, ".build/debug/profile-escrow")))
    if not os.access(binary, os.X_OK):
        print(f"check-docs: no profile-escrow at {binary}: build it (swift build) or set PROFILE_ESCROW_BIN", file=sys.stderr)
        return 2
    pages = [os.path.relpath(os.path.abspath(page), ROOT) for page in sys.argv[1:]]
    os.chdir(ROOT)
    pages = pages or (["README.md"] + sorted(glob.glob("docs/**/*.md", recursive=True)))
    counts = {"ok": 0, "skip": 0, "FAIL": 0}
    for page in pages:
        for status, line, detail in run_page(page, binary):
            counts[status] += 1
            print(f"{status:<5} {page}:{line}" + (f"  ({detail})" if detail else ""))
    print(f"docs-check: {counts['ok']} ok, {counts['skip']} skipped, {counts['FAIL']} failed")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
