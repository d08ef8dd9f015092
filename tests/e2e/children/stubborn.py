"""Ignores SIGTERM and starts a grandchild in its own process group that ignores it too."""
import os, signal, subprocess, sys, time
out = sys.argv[sys.argv.index("--output") + 1]
signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen(["/usr/bin/python3", "-c",
    "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"])
with open(os.path.join(out, "pids"), "w") as f:
    f.write(f"{os.getpid()} {grandchild.pid}\n")
while True:
    time.sleep(3600)
