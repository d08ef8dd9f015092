"""Reads each path given after --output DIR, as a child that goes looking for
serve's secret files would, and records what it found in read.json."""
import json, os, sys
out = sys.argv[sys.argv.index("--output") + 1]
found = {}
for path in sys.argv[sys.argv.index("--output") + 2:]:
    try:
        with open(path, "rb") as f:
            found[path] = f.read().decode("latin-1")
    except OSError as e:
        found[path] = f"error: {e.strerror}"
with open(os.path.join(out, "read.json"), "w") as f:
    json.dump(found, f)
