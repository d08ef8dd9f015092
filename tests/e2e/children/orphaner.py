"""Leaves an orphan: a grandchild in a session of its own that would outlive this process."""
import os, subprocess, sys
out = sys.argv[sys.argv.index("--output") + 1]
grandchild = subprocess.Popen(["/usr/bin/python3", "-c", "import time; time.sleep(30)"],
                              start_new_session=True)
with open(os.path.join(out, "orphan"), "w") as f:
    f.write(f"{grandchild.pid}\n")
