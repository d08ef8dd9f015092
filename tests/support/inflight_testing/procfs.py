"""Processes as /proc shows them, for tests that check nothing outlives or is
left unreaped by serve, and for benchmarks that read its CPU and memory."""

import os
import signal
import time
from pathlib import Path


def stat_fields(pid):
    """/proc/PID/stat after the command name: [0] is the state (field 3),
    [1] the ppid, [11] and [12] utime and stime."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def status_fields(pid):
    """/proc/PID/status as {key: value text}, e.g. "VmRSS": "5420 kB"."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def process_exists(pid):
    """Alive and not a zombie."""
    try:
        state = stat_fields(pid)[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _processes():
    """(pid, stat fields) of every process, skipping those that exit while read."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            yield int(stat.parent.name), stat_fields(stat.parent.name)
        except (OSError, IndexError, ValueError):
            continue


def children_of(ppid):
    """Pids of the processes whose parent is `ppid`, sorted."""
    return sorted(pid for pid, fields in _processes() if int(fields[1]) == ppid)


def descendants_of(pid):
    """Pids of every process below `pid`, parents before their children."""
    parents = {p: int(fields[1]) for p, fields in _processes()}
    found, todo = [], [pid]
    while todo:
        parent = todo.pop(0)
        below = sorted(p for p, ppid in parents.items() if ppid == parent)
        found += below
        todo += below
    return found


def zombies_of(ppid):
    """Zombie processes whose parent is `ppid`."""
    return [pid for pid, fields in _processes() if fields[0] == "Z" and int(fields[1]) == ppid]


def cpu(pid):
    """(utime+stime ticks, on-CPU ns from schedstat, context switches) of one
    process; the last two resolve far below one tick."""
    fields = stat_fields(pid)
    ticks = int(fields[11]) + int(fields[12])
    ns = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    status = status_fields(pid)
    switches = int(status["voluntary_ctxt_switches"]) + int(status["nonvoluntary_ctxt_switches"])
    return ticks, ns, switches


def tagged_processes(var, tag):
    """Live processes whose environment holds VAR=TAG, as (pid, command line):
    a serve started with such a tag, and every child, descendant and agent
    of it that inherits its environment."""
    needle = f"{var}={tag}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes().split(b"\0"):
                pid = int(environ.parent.name)
                cmd = (environ.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                if process_exists(pid):
                    found.append((pid, cmd.decode(errors="replace").strip()))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


def kill_tagged(var, tag, timeout=5):
    """SIGKILLs every process tagged VAR=TAG until none is left (or `timeout`
    seconds pass); returns those still there."""
    deadline = time.monotonic() + timeout
    while (procs := tagged_processes(var, tag)) and time.monotonic() < deadline:
        for pid, _ in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
    return tagged_processes(var, tag)
