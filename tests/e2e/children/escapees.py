"""Starts two grandchildren that leave its process group: one through
setsid, one through a double fork (its parent exits at once, so it is
re-parented). Each appends a line to `escapees.log` in the run dir every
50 ms and writes its pid to `escapee-<how>.pid`; the
child's own is in `leader.pid`. The child itself then waits
for a signal (--wait), kills its parent, the run shim (--kill-shim), or
exits 0 once both escapees wrote a line."""
import os, sys, time
out = sys.argv[sys.argv.index("--output") + 1]
log = os.path.join(out, "escapees.log")
with open(os.path.join(out, "leader.pid"), "w") as f:
    f.write(f"{os.getpid()}\n")


def write_forever(how):
    with open(os.path.join(out, f"escapee-{how}.pid.tmp"), "w") as f:
        f.write(f"{os.getpid()}\n")
    os.rename(os.path.join(out, f"escapee-{how}.pid.tmp"), os.path.join(out, f"escapee-{how}.pid"))
    n = 0
    while True:
        with open(log, "a") as f:
            f.write(f"{how} {os.getpid()} {n}\n")
        n += 1
        time.sleep(0.05)


def start(how):
    if os.fork() != 0:
        return
    if how == "setsid":
        os.setsid()
        write_forever(how)
    if os.fork() != 0:
        os._exit(0)  # the double fork: the grandchild loses its parent at once
    os.setpgid(0, 0)
    write_forever(how)


start("setsid")
pid = os.fork()
if pid == 0:
    start("double-fork")
    os._exit(0)
os.waitpid(pid, 0)
for how in ("setsid", "double-fork"):
    while not os.path.exists(os.path.join(out, f"escapee-{how}.pid")):
        time.sleep(0.01)
if "--kill-shim" in sys.argv:
    os.kill(os.getppid(), 9)
if "--wait" in sys.argv or "--kill-shim" in sys.argv:
    while True:
        time.sleep(3600)
