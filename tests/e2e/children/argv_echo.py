"""Records its argv and environment, then waits for SIGTERM."""
import json, os, signal, sys, time
out = sys.argv[sys.argv.index("--output") + 1]
with open(os.path.join(out, "argv.jsonl"), "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "env": dict(os.environ)}) + "\n")
if "--wait" in sys.argv:
    signal.pause()
