#!/bin/sh
# A stand-in for a model, for promptfoo's `exec:` provider
# (promptfooconfig.yaml): promptfoo passes the rendered prompt as $1 (then the
# provider options and the test context as JSON, unused here) and takes stdout
# as the answer. It thinks for a moment (AGENT_DELAY seconds, default 0.3, so
# that an interruption catches some tests done and some not).
set -eu
sleep "${AGENT_DELAY:-0.3}"
sum=$(printf '%s\n' "$1" | sed -n 's/.*What is \([0-9]*\) + \([0-9]*\)?.*/\1 + \2/p')
echo "The answer is $(($sum))."
