#!/bin/sh
# A stand-in for an agent, for agentv's `cli` target (.agentv/targets.yaml):
# reads "What is A + B?" from the prompt file ($1), thinks for a moment
# (AGENT_DELAY seconds, default 0.3, so that an interruption catches some tests
# done and some not), and writes the sum to the answer file ($2).
set -eu
sleep "${AGENT_DELAY:-0.3}"
sum=$(sed -n 's/.*What is \([0-9]*\) + \([0-9]*\)?.*/\1 + \2/p' "$1")
echo "The answer is $(($sum))." > "$2"
