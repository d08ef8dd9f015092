"""A child that looks for secrets the way hostile model-written code would:
it reads /proc/PID/cmdline, /proc/PID/environ and opens /proc/PID/mem of every
process it can see, its parent chain included, again and again until it has
watched a checkpoint agent (or --seconds pass), appending a line to its
progress file each round so that every periodic checkpoint has work. It
writes what it found to spy.json in its run dir."""
import json, os, sys, time
from pathlib import Path

out = Path(sys.argv[sys.argv.index("--output") + 1])
min_seconds, max_seconds = 1.5, 20.0
AGENT = "inflight-checkpoint-agent"


def read(path):
    try:
        return Path(path).read_bytes().decode("latin-1"), None
    except OSError as e:
        return None, type(e).__name__


def mem_opens(pid):
    """Whether /proc/PID/mem opens: what a non-dumpable process refuses."""
    try:
        os.close(os.open(f"/proc/{pid}/mem", os.O_RDONLY))
        return "opened"
    except OSError as e:
        return type(e).__name__


def parent_chain():
    chain, pid = [], os.getppid()
    while pid > 0:
        chain.append(pid)
        stat, _ = read(f"/proc/{pid}/stat")
        pid = int(stat.rsplit(")", 1)[1].split()[1]) if stat else 0
    return chain


seen = {}  # (pid, cmdline, environ) -> record
agents = set()
started = time.monotonic()
rounds = 0
with open(out / "seen.jsonl", "a") as progress:
    while True:
        elapsed = time.monotonic() - started
        if elapsed > max_seconds or (elapsed > min_seconds and agents):
            break
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            cmdline, _ = read(entry / "cmdline")
            environ, environ_error = read(entry / "environ")
            if cmdline is None:
                continue  # gone
            if cmdline.split("\0")[0].endswith("/" + AGENT):
                agents.add(int(entry.name))
            key = (entry.name, cmdline, environ)
            if key not in seen:
                stat, _ = read(entry / "stat")
                ppid = int(stat.rsplit(")", 1)[1].split()[1]) if stat else None
                seen[key] = {"pid": int(entry.name), "ppid": ppid, "cmdline": cmdline,
                             "environ": environ,
                             "environ_error": environ_error, "mem": mem_opens(entry.name)}
        rounds += 1
        progress.write(json.dumps({"round": rounds}) + "\n")
        progress.flush()

own_environ, _ = read("/proc/self/environ")
(out / "spy.json").write_text(json.dumps({
    "own_environ": own_environ, "parents": parent_chain(), "agents": sorted(agents),
    "rounds": rounds, "seen": list(seen.values())}))
