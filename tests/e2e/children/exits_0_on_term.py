"""Records one test, then waits; SIGTERM makes it exit 0 (a tool that treats
the signal as a clean end): its run is over, not interrupted."""
import json, os, signal, sys
out = sys.argv[sys.argv.index("--output") + 1]
with open(os.path.join(out, "index.jsonl"), "a") as f:
    f.write(json.dumps({"test_id": "t001"}) + "\n")
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    signal.pause()
