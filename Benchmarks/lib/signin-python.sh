# Sourced by the sign-in benchmarks, from the repository's root: BIN (the release build of profile-escrow, built when
# not given) and PYTHON (a virtual environment with `cryptography`, which signs the stand-in Apple's tokens).
if [ -z "${BIN:-}" ]; then
    swift build -c release --scratch-path .build-rel --product profile-escrow 2>&1 | tail -n 1
    BIN="$(swift build -c release --scratch-path .build-rel --show-bin-path)/profile-escrow"
fi
venv=.venv-browser
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import cryptography' 2>/dev/null || "$venv/bin/pip" install -q cryptography
PYTHON="$venv/bin/python"
