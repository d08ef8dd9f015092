"""Records one test, then waits; its stop signal (SIGTERM, SIGINT, ...) makes
it write the signal's number to `signal` and exit 0, as a tool that pauses and
saves its progress does. Resumed, it has nothing left to do: it writes
`resumed` and exits 0 at once."""
import json, os, signal, sys
out = sys.argv[sys.argv.index("--output") + 1]
if "--resume" in sys.argv:
    with open(os.path.join(out, "resumed"), "w") as f:
        f.write("resumed\n")
    sys.exit(0)


def paused(signum, _frame):
    with open(os.path.join(out, "signal"), "w") as f:
        f.write(f"{signum}\n")
    sys.exit(0)


for stop in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
    signal.signal(stop, paused)
with open(os.path.join(out, "index.jsonl"), "a") as f:
    f.write(json.dumps({"test_id": "t001"}) + "\n")
while True:
    signal.pause()
