"""Writes records, then fills its volume until the write fails (ENOSPC), then
waits for SIGTERM: a child that fills the shared runs volume."""
import json, os, signal, sys
out = sys.argv[sys.argv.index("--output") + 1]
with open(os.path.join(out, "index.jsonl"), "a") as f:
    f.write(json.dumps({"test_id": "t001"}) + "\n")
try:
    with open(os.path.join(out, "filler.bin"), "wb") as f:
        while True:
            f.write(b"x" * 65536)
            f.flush()
except OSError:
    pass
with open(os.path.join(out, "full"), "w"):
    pass
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
while True:
    signal.pause()
