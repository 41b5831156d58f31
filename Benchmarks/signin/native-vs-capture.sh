#!/usr/bin/env bash
# Serve's CPU per app's native capture (`POST /v1/apple/native/capture`, one RS256 identity token verified) beside its
# CPU per plain `POST /v1/escrows`, whole processes, one run: callback-vs-capture.py's phases, which include both
# (and the app's attempt, the web callback and the redeem); its "native capture / capture" line is the ratio.
#   Benchmarks/signin/native-vs-capture.sh [operations] [connections] [rounds]     (BIN=<profile-escrow> skips the build)
exec "$(dirname "$0")/callback-vs-capture.sh" "$@"
