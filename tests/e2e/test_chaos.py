#!/usr/bin/python3
"""Seeded, bounded chaos test of `inflight serve` (issue 9, point 7).

Why this file exists: the product promises that a partial eval is never lost
and never paid for twice. The other e2e tests pin each known race down
deterministically; this one looks for the races nobody has written a test for
yet, by injecting one fault at a random moment and checking the same
invariants after every trial.

One trial (every choice drawn from the trial's seed):

1. pod-a starts on an empty results repo (a `git daemon` behind a TCP proxy
   that can go down or hang; with --history-one-in K, one trial in K on a
   repo that already holds 20,000 finished runs, their entries in layout 1's
   index or, with --history-layout 2, in layout 2's log), gets 2 to 4 demo runs, and after a random delay
   one fault: SIGTERM, SIGINT, a double SIGTERM, SIGKILL of the whole pod while
   periodic checkpoints run, SIGKILL of one child (then SIGTERM), SIGTERM to
   the next instance while it restores, the remote down at shutdown, or the
   remote accepting connections and never answering at shutdown.
2. The next instance restarts on the kept disk or on a wiped one, alone or as
   two pods restoring together from the same results repo, and finishes every
   run that survived.
3. Every disk left is started once more: nothing may run again.

Invariants: every test of every run recorded exactly once in the copy that
finished; no torn line in any progress file; final_status and the attempt
history agree with the log; no run finished twice; no process of an instance
(children, agents) outlives it; no `inflight/*` branch left at the end; every
exit code as docs/serve.md "Shutdown" says (0 only when every
checkpoint landed, which is checked against the branches); every shutdown
within grace period + 2 s. A run is allowed to vanish only when it could not
have been saved: its pod was SIGKILLed, or its checkpoint was reported as not
pushed, and its disk wiped.

A failed invariant is a bug to report, never a trial to skip. Timing is not
reproducible, the choices are: a failing trial prints its seed and the command
that reruns it alone.

Running it:
    tests/support/python -m pytest tests/e2e/test_chaos.py        # CI: 8 trials, fixed seed
    INFLIGHT_CHAOS_TRIALS=40 INFLIGHT_CHAOS_SEED=7 tests/support/python -m pytest tests/e2e/test_chaos.py
    tests/support/python tests/e2e/test_chaos.py --trials 200 --seed 12345
    tests/support/python tests/e2e/test_chaos.py --seed 12345 --only-trial 17
    tests/support/python tests/e2e/test_chaos.py --trial-seed 3141592 --fault remote_down
Binaries come from INFLIGHT_BIN_DIR (default build/bin), as for every e2e test.
tests/support/python puts the support package (tests/support) on the path.
"""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from conftest import DEMO, INFLIGHT
from inflight_testing.git_servers import branches, start_git_daemon
from inflight_testing.history import write_history
from inflight_testing.procfs import kill_tagged, process_exists, tagged_processes
from inflight_testing.proxies import FlakyRemote
from inflight_testing.run_dirs import index_ids
from inflight_testing.seeded_trials import (argument_parser, ci_plans, failure, fault_for,
                                            parse_args, plans_of, run_trials)
from inflight_testing.serve import Serve
from inflight_testing.waiting import wait_for

DEFAULT_SEED = 20261121
CI_TRIALS = 8
GRACE_S = 5
FLUSH_S = 1
GIT_TIMEOUT_S = 5
SHUTDOWN_SLACK_S = 2
MAX_ATTEMPTS = 20
HISTORY_RUNS = 20_000
RECOVERY_DEADLINE_S = 90
PUSH_FAILURES = {"checkpoint not pushed; the run stays on local disk",
                 "grace period over before every checkpoint landed",
                 "the branch of a finished run is not deleted; its final state stays on local disk"}
# Not INFLIGHT_*: serve passes it on to agents, and to children through the
# template's inherit_env (chaos_config).
TAG_VAR = "CHAOS_POD_TAG"


# --------------------------------------------------------------------------
# the plan of a trial


@dataclass(frozen=True)
class RunSpec:
    run_id: str
    tests: int
    test_ms: int

    def test_ids(self):
        return [f"t{n:03d}" for n in range(1, self.tests + 1)]


@dataclass
class TrialPlan:
    index: int
    seed: int
    master_seed: object  # None when the trial was given by --trial-seed
    fault: str
    disk: str  # "kept" or "wiped": what the next instance starts on
    restart: str  # "single" or "pair" (two pods restoring together)
    runs: list
    max_concurrent: int
    interval_ms: int
    fault_delay: float
    history: int  # finished runs the results repo holds before the trial starts
    history_layout: int  # whose index lists them: layout 1's or layout 2's
    rng: random.Random = field(repr=False)

    def describe(self):
        return (f"trial {self.index}: fault={self.fault} disk={self.disk} restart={self.restart} "
                f"runs={[(r.tests, r.test_ms) for r in self.runs]} max_concurrent={self.max_concurrent} "
                f"interval={self.interval_ms}ms delay={self.fault_delay:.2f}s history={self.history} "
                f"history_layout={self.history_layout} "
                f"trial_seed={self.seed}")

    def rerun(self):
        script = "tests/support/python tests/e2e/test_chaos.py"
        history = (f" --history-one-in 1 --history-layout {self.history_layout}"
                   if self.history else "")
        alone = f"{script} --trial-seed {self.seed} --fault {self.fault}{history}"
        if self.master_seed is None:
            return alone
        return (f"{script} --seed {self.master_seed} --only-trial {self.index}{history}"
                f"   (or: {alone})")


def history_for(seed, one_in):
    """With --history-one-in K, one trial in K starts on a results repo that
    already holds HISTORY_RUNS finished runs. Drawn apart from the trial's
    other choices, which stay what they are without it."""
    drawn = one_in and random.Random(f"{seed}:history").randrange(one_in) == 0
    return HISTORY_RUNS if drawn else 0


def plan_trial(master_seed, index, fault=None, seed=None, history_one_in=0, history_layout=1):
    if seed is None:
        seed = random.Random(f"{master_seed}:{index}").getrandbits(32)
    rng = random.Random(seed)
    runs = [RunSpec(f"c{index}-{n}", rng.randint(8, 24), rng.randint(60, 160))
            for n in range(rng.randint(2, 4))]
    return TrialPlan(index=index, seed=seed, master_seed=master_seed,
                     fault=fault or fault_for(master_seed, index, FAULTS),
                     disk=rng.choice(["kept", "wiped"]), restart=rng.choice(["single", "pair"]),
                     runs=runs, max_concurrent=rng.randint(1, 3), interval_ms=rng.randint(250, 1000),
                     fault_delay=rng.uniform(0.2, 4.0), history=history_for(seed, history_one_in),
                     history_layout=history_layout, rng=rng)


# --------------------------------------------------------------------------
# one instance of serve


@dataclass
class Disk:
    pod: str
    path: Path

    @property
    def runs(self):
        return self.path / ".inflight" / "runs"


class Instance:
    """One `inflight serve` of a trial: its pod and disk, a tag on all its
    processes (so that none can escape the checks), and how it ended."""

    def __init__(self, name, disk):
        self.name = name
        self.disk = disk
        self.tag = uuid.uuid4().hex
        self.serve = None
        self.exit_code = None
        self.shutdown_s = None  # signal to exit

    def launch(self, args):
        self.serve = Serve(self.disk.path, args, env={TAG_VAR: self.tag}, binary=INFLIGHT)

    def events(self, msg=None, **fields):
        if self.serve is None:
            return []
        return [e for e in self.serve.events() if (msg is None or e.get("msg") == msg)
                and all(e.get(k) == v for k, v in fields.items())]

    def log_text(self):
        return "".join(self.serve.lines) if self.serve else "(serve did not start)\n"

    def succeeded_runs(self):
        return {e["run_id"] for e in self.events("attempt ended", outcome="succeeded")}


# --------------------------------------------------------------------------
# reading run dirs and branches


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None


def local_params(disk, run_id):
    return read_json(disk.runs / run_id / "run-params.json")


def is_final(params):
    return params is not None and "final_status" in params


def resumable_copy(params):
    return params is not None and not is_final(params) and "handed_over" not in params


def branch_of(bare, run_id):
    refs = [ref for ref in branches(bare) if ref.rsplit("/", 1)[-1] == run_id]
    assert len(refs) <= 1, f"run {run_id} has several branches: {refs}"
    return refs[0] if refs else None


def branch_file(bare, ref, name):
    proc = subprocess.run(["git", "-C", str(bare), "show", f"{ref}:{name}"], capture_output=True)
    return proc.stdout.decode() if proc.returncode == 0 else None


def tip_params(bare, run_id):
    ref = branch_of(bare, run_id)
    return json.loads(branch_file(bare, ref, "run-params.json") or "null") if ref else None


def check_complete_lines(path):
    """No torn line: the file ends with a newline and every line is JSON."""
    text = Path(path).read_text()
    assert text == "" or text.endswith("\n"), f"{path}: torn last line {text.splitlines()[-1]!r}"
    for number, line in enumerate(text.splitlines(), 1):
        try:
            json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"{path}:{number}: not a complete JSON line: {line!r}") from None


def check_exactly_once(run, run_dir):
    check_complete_lines(run_dir / "index.jsonl")
    ids = index_ids(run_dir)
    twice = sorted(t for t, n in Counter(ids).items() if n > 1)
    missing = sorted(set(run.test_ids()) - set(ids))
    extra = sorted(set(ids) - set(run.test_ids()))
    assert not (twice or missing or extra), \
        f"run {run.run_id} in {run_dir}: tests twice {twice}, missing {missing}, unknown {extra}"


def check_history(run_id, params):
    """The attempt history of a finished copy: 1..n, only the last succeeded."""
    attempts = params["attempts"]
    assert [a["attempt"] for a in attempts] == list(range(1, len(attempts) + 1)), \
        f"run {run_id}: attempts not numbered 1..n: {attempts}"
    outcomes = [a.get("outcome") for a in attempts]
    assert params.get("final_status") == "succeeded" and outcomes[-1] == "succeeded", \
        f"run {run_id}: final_status {params.get('final_status')}, outcomes {outcomes}"
    assert all(o in ("interrupted", "crashed") for o in outcomes[:-1]), \
        f"run {run_id}: an earlier attempt is not resumable: {outcomes}"


# --------------------------------------------------------------------------
# the trial


class Trial:
    """The instances of one trial, what each left behind, and the checks.

    Book-keeping across instances: how often each run finished (at most
    once, or twice when its final state legitimately could not be saved and
    its disk was wiped), the runs that could not be saved at all, and the
    runs the next instance must finish."""

    def __init__(self, plan, root, remote, bare):
        self.plan = plan
        self.rng = plan.rng
        self.root = root
        self.remote = remote
        self.bare = bare
        self.instances = []
        self.pods = iter(f"pod-{c}" for c in "abcdefghijklmnop")
        self.runs = {r.run_id: r for r in plan.runs}
        self.completions = Counter()  # run id -> attempts that succeeded, over every instance
        self.reruns_allowed = set()  # finished runs whose final state could not be saved
        self.lost = set()  # runs that could not have been saved anywhere
        self.pending = set()  # runs the next instance must finish
        self.notes = []  # what the fault met, for the summary

    # instances

    def new_disk(self):
        pod = next(self.pods)
        path = self.root / f"disk-{pod}"
        path.mkdir()
        return Disk(pod, path)

    def start(self, disk, role):
        return self.start_together([disk], role)[0]

    def start_together(self, disks, role):
        """One instance per disk, launched together, each after a random
        stagger (two pods restoring together race for the same branches,
        and either may win)."""
        instances = [Instance(f"{len(self.instances) + n + 1}-{role}-{disk.pod}", disk)
                     for n, disk in enumerate(disks)]
        self.instances.extend(instances)  # before launching: kill_everything must see their tags
        failures = []
        staggers = [self.rng.uniform(0, 0.3) if len(disks) > 1 else 0 for _ in disks]

        def launch(instance, stagger):
            time.sleep(stagger)
            try:
                instance.launch(self.serve_args(instance.disk))
            except Exception as e:  # noqa: BLE001 -- re-raised below, in this thread
                failures.append(e)
        threads = [threading.Thread(target=launch, args=pair) for pair in zip(instances, staggers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
        return instances

    def config(self):
        """The built-in demo template, whose children also carry the tag."""
        path = self.root / "config.json"
        if not path.exists():
            integer = {"type": "integer", "min": 0, "max": 99999}
            path.write_text(json.dumps({"child": {
                "argv": [str(DEMO), "--output", "{output_dir}", "--tests", "{tests}",
                         "--test-ms", "{test_ms}"],
                "resume_argv": ["--resume"], "inherit_env": [TAG_VAR],
                "params": {"tests": integer | {"default": 20},
                           "test_ms": integer | {"max": 86400000, "default": 500}},
                "progress_file": "index.jsonl"}}))
        return path

    def serve_args(self, disk):
        return ["--config", str(self.config()), "--pod-name", disk.pod, "--results-repo", self.remote.url(self.bare.name),
                "--checkpoint-interval", f"{self.plan.interval_ms}ms",
                "--grace-period", f"{GRACE_S}s", "--flush-window", f"{FLUSH_S}s",
                "--git-timeout", f"{GIT_TIMEOUT_S}s", "--max-attempts", str(MAX_ATTEMPTS),
                "--max-concurrent", str(self.plan.max_concurrent)]

    def submit_all(self, instance):
        instance.serve.wait_ready(timeout=30)
        for run in self.plan.runs:
            instance.serve.submit(id=run.run_id, tests=run.tests, test_ms=run.test_ms)

    def shutdown(self, instances, signals=(signal.SIGTERM,), gap=0.0, remote_ok=True):
        """Signals every instance at once; each must exit within grace + 2 s
        with the exit code docs/serve.md "Shutdown" gives."""
        started = time.monotonic()
        for sig in signals:
            for instance in instances:
                instance.serve.signal(sig)
            time.sleep(gap)
        limit = GRACE_S + SHUTDOWN_SLACK_S
        for instance in instances:
            try:
                instance.exit_code = instance.serve.proc.wait(
                    timeout=max(0.1, started + limit + 10 - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{instance.name}: still running {limit + 10}s after the signal")
            took = instance.shutdown_s = time.monotonic() - started
            instance.serve.reader.join(timeout=5)
            assert took <= limit, f"{instance.name}: shutdown took {took:.2f}s, over grace + 2s"
            self.settle(instance, remote_ok)

    def kill_pod(self, instance):
        """SIGKILL of the whole pod: serve first, then everything it started."""
        instance.serve.proc.kill()
        left = kill_tagged(TAG_VAR, instance.tag)
        assert not left, f"{instance.name}: processes survive SIGKILL: {left}"
        instance.exit_code = instance.serve.wait_exit(timeout=10)
        self.check_run_dirs(instance, log_complete=False)
        self.count_completions(instance)

    # checks after an instance is gone

    def settle(self, instance, remote_ok):
        self.check_no_process_left(instance)
        self.check_exit_code(instance, remote_ok)
        self.check_run_dirs(instance)
        self.count_completions(instance)

    def check_no_process_left(self, instance):
        try:
            wait_for(lambda: not tagged_processes(TAG_VAR, instance.tag), 2, "no process left")
        except AssertionError:
            raise AssertionError(f"{instance.name} exited and left {tagged_processes(TAG_VAR, instance.tag)}")

    def check_exit_code(self, instance, remote_ok):
        code = instance.exit_code
        work = self.unsaved_work(instance)
        if remote_ok:
            assert code == 0, f"{instance.name}: exit {code} with the remote up"
        elif work:
            assert code == 1, \
                f"{instance.name}: exit {code} with the remote down/hung; not on the remote: {work}"
        elif code == 1:
            # A push can land while its answer is lost (the remote hung after
            # reading it): exit 1 is then right, if serve says what failed.
            failed = [e for e in instance.events() if e.get("msg") in PUSH_FAILURES]
            assert failed, f"{instance.name}: exit 1 with everything on the remote and no failure logged"
        if code == 0:
            assert not work, f"{instance.name}: exit 0 but not everything landed: {work}"

    def unsaved_work(self, instance):
        """What a shutdown should have pushed and did not: a resumable run
        whose branch tip differs from the disk, or a finished run whose
        branch is still there. A copy the instance left to another pod's
        claim is not its work (a stale copy is caught by the last look)."""
        disk, work = instance.disk, []
        left = {e["run_id"] for e in instance.events("run claimed by another instance; left to it")}
        for run_id in self.local_run_ids(disk):
            params = local_params(disk, run_id)
            if run_id in left and not is_final(params):
                continue
            ref = branch_of(self.bare, run_id)
            if is_final(params):
                if ref:
                    work.append(f"{run_id}: finished, branch {ref} left")
            elif resumable_copy(params):
                if not ref:
                    work.append(f"{run_id}: resumable, no branch")
                    continue
                tip = json.loads(branch_file(self.bare, ref, "run-params.json") or "null")
                local_index = read_text(disk.runs / run_id / "index.jsonl")
                if (tip or {}).get("attempts") != params["attempts"] or \
                        branch_file(self.bare, ref, "index.jsonl") != local_index:
                    work.append(f"{run_id}: branch tip differs from the run dir")
        return work

    def check_run_dirs(self, instance, log_complete=True):
        """No torn line anywhere; the log and run-params.json agree (unless
        the pod was killed between the two writes); every run this instance
        finished is complete, each test once."""
        for run_id in self.local_run_ids(instance.disk):
            run_dir = instance.disk.runs / run_id
            if (run_dir / "index.jsonl").exists():
                check_complete_lines(run_dir / "index.jsonl")
            params = local_params(instance.disk, run_id)
            assert params.get("final_status") in (None, "succeeded"), \
                f"{instance.name}: run {run_id} final_status {params['final_status']}"
            if log_complete:
                self.check_log_matches(instance, run_id, params)
        out_of_attempts = [e for e in instance.events() if "run reached --max-" in e.get("msg", "")]
        assert not out_of_attempts, f"{instance.name}: {out_of_attempts}"
        for run_id in instance.succeeded_runs():
            params = local_params(instance.disk, run_id)
            assert params, f"{instance.name}: run {run_id} succeeded but has no run dir"
            if not log_complete and not is_final(params):
                # Killed after the attempt's end was logged, before its final
                # run-params.json was written (a synced write): the run is
                # resumed, a rerun the recovery allows (classify()).
                continue
            check_history(run_id, params)
            check_exactly_once(self.runs[run_id], instance.disk.runs / run_id)

    def check_log_matches(self, instance, run_id, params):
        if "handed_over" in params:
            return
        history = {a["attempt"]: a for a in params["attempts"]}
        for event in instance.events("attempt ended", run_id=run_id):
            recorded = history.get(event["attempt"], {})
            assert recorded.get("outcome") == event["outcome"], \
                (f"{instance.name}: run {run_id} attempt {event['attempt']} ended {event['outcome']} "
                 f"in the log, {recorded.get('outcome')} in run-params.json")
        for event in instance.events("attempt started", run_id=run_id):
            recorded = history.get(event["attempt"], {})
            assert recorded.get("pod") == instance.disk.pod, \
                f"{instance.name}: run {run_id} attempt {event['attempt']} missing from run-params.json"

    def count_completions(self, instance):
        for run_id in instance.succeeded_runs():
            self.completions[run_id] += 1
            allowed = 2 if run_id in self.reruns_allowed else 1
            assert self.completions[run_id] <= allowed, \
                f"run {run_id} finished {self.completions[run_id]} times (paid twice)"

    def local_run_ids(self, disk):
        return sorted(r for r in self.runs if (disk.runs / r / "run-params.json").exists())

    # handing over to the next instance

    def next_disks(self, last, count=1):
        """The disks of the next instance(s): the last one kept or wiped per
        the plan, plus fresh ones for a pair. Records what must still finish."""
        kept = self.plan.disk == "kept"
        self.pending = set()
        for run_id in self.runs:
            self.classify(run_id, last, kept)
        first = last.disk if kept else self.wipe(last.disk)
        return [first] + [self.new_disk() for _ in range(count - 1)]

    def classify(self, run_id, last, kept):
        local = local_params(last.disk, run_id) if kept else None
        tip = tip_params(self.bare, run_id)
        if is_final(local) or (not resumable_copy(local) and is_final(tip)):
            return  # finished: the next instance deletes any branch, never reruns it
        if resumable_copy(local) or (tip is not None and not is_final(tip)):
            self.pending.add(run_id)
            if self.completions[run_id]:
                assert last.exit_code != 0, f"run {run_id} finished, its final state unsaved, exit 0"
                self.reruns_allowed.add(run_id)
            return
        if not self.completions[run_id]:
            assert last.exit_code != 0, f"run {run_id} lost although {last.name} exited 0"
            self.lost.add(run_id)

    def wipe(self, disk):
        shutil.rmtree(disk.path)
        return self.new_disk()

    # recovery and the last look

    def recover(self, last):
        """The next instance(s) restore and finish every run that survived."""
        count = 2 if self.plan.restart == "pair" else 1
        disks = self.next_disks(last, count)
        pods = self.start_together(disks, "recover")
        self.wait_finished(pods)
        # A finished run's branch whose pod died with the remote down is that pod's while its
        # lease lives (docs/checkpoints.md "Leases and clocks"): released by a later look, once
        # the lease ended, not at the recovering pods' start. Failing the wait, the assertion
        # below names what is left.
        try:
            wait_for(lambda: not branches(self.bare), RECOVERY_DEADLINE_S,
                     "every branch released", interval=0.2)
        except AssertionError:
            pass
        self.shutdown(pods)
        unfinished = sorted(r for r in self.pending if not any(r in p.succeeded_runs() for p in pods))
        assert not unfinished, f"runs not finished after recovery: {unfinished}"
        left = branches(self.bare)
        assert not left, f"branches left after recovery: {sorted(left)}"
        return disks

    def wait_finished(self, pods):
        def done():
            for pod in pods:
                if pod.serve.proc.poll() is not None:
                    raise AssertionError(f"{pod.name} exited {pod.serve.proc.poll()} during recovery")
            finished = set().union(*(p.succeeded_runs() for p in pods))
            return self.pending <= finished
        for pod in pods:
            pod.serve.wait_ready(timeout=60)
        try:
            wait_for(done, RECOVERY_DEADLINE_S, "every surviving run to finish")
        except AssertionError as e:
            finished = set().union(*(p.succeeded_runs() for p in pods))
            raise AssertionError(f"{e}; unfinished: {sorted(self.pending - finished)}") from None

    def check_nothing_runs_again(self, disks):
        """Each disk left, started once more, restores and starts nothing."""
        for disk in disks:
            stale = self.stale_copies(disk)
            instance = self.start(disk, "verify")
            instance.serve.wait_ready(timeout=60)
            back = instance.events("attempt started") + instance.events("run restored")
            again = sorted({e["run_id"] for e in back})
            assert not again, (f"{instance.name}: finished runs come back (restored and started again): "
                               f"{again}; resumable copies on its disk before the start: {stale}")
            self.shutdown([instance])
        assert not branches(self.bare), f"branches left at the end: {sorted(branches(self.bare))}"
        self.check_all_accounted()

    def stale_copies(self, disk):
        """Run dirs a start on this disk would resume."""
        copies = {r: local_params(disk, r) for r in self.local_run_ids(disk)}
        return [f"{r} (attempts {[a.get('outcome') for a in p['attempts']]}, no handed_over)"
                for r, p in copies.items() if resumable_copy(p)]

    def check_all_accounted(self):
        for run_id in self.runs:
            if run_id in self.lost:
                continue
            assert self.completions[run_id] >= 1, f"run {run_id} never finished"

    def summary(self):
        ends = ", ".join(f"{i.name} exit {i.exit_code}"
                         + (f" in {i.shutdown_s:.1f}s" if i.shutdown_s is not None else "")
                         for i in self.instances)
        notes = "".join(f"; {n}" for n in self.notes)
        return f"{ends}; lost (never saved) {sorted(self.lost) or 'none'}{notes}"

    def kill_everything(self):
        for instance in self.instances:
            if instance.serve is not None and instance.serve.proc.poll() is None:
                instance.serve.proc.kill()
            kill_tagged(TAG_VAR, instance.tag)
            if instance.serve is not None:
                try:
                    instance.serve.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass

    def write_logs(self):
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        for instance in self.instances:
            (logs / f"{instance.name}.log").write_text(instance.log_text())
        return logs


def read_text(path):
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        return None


# --------------------------------------------------------------------------
# faults: each injects one fault into the first instance (after the trial's
# random delay) and returns the last instance before recovery.


def fault_sigterm(trial, pod, sig=signal.SIGTERM):
    time.sleep(trial.plan.fault_delay)
    trial.shutdown([pod], [sig])
    return pod


def fault_sigint(trial, pod):
    return fault_sigterm(trial, pod, signal.SIGINT)


def fault_double_sigterm(trial, pod):
    time.sleep(trial.plan.fault_delay)
    trial.shutdown([pod], [signal.SIGTERM, signal.SIGTERM], gap=trial.rng.uniform(0, 0.6))
    return pod


def fault_sigkill_serve(trial, pod):
    """SIGKILL of the whole pod while periodic checkpoints run: a run that
    had been running for a while has a branch (SIGKILL loses at most about
    one interval; queued runs are only checkpointed at shutdown)."""
    time.sleep(trial.plan.fault_delay)
    trial.notes.append(f"{len(pod.events('checkpoint pushed'))} checkpoints pushed before SIGKILL")
    killed_at = time.time()
    trial.kill_pod(pod)
    long_enough = killed_at - (2 * trial.plan.interval_ms / 1000 + 2)
    for event in pod.events("attempt started"):
        started = datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
        if started < long_enough and not is_final(local_params(pod.disk, event["run_id"])):
            assert branch_of(trial.bare, event["run_id"]), \
                f"run {event['run_id']} ran {killed_at - started:.0f}s with no checkpoint before SIGKILL"
    return pod


def fault_sigkill_child(trial, pod):
    """One child dies of a signal serve did not send; later serve gets SIGTERM."""
    time.sleep(trial.plan.fault_delay)
    victim = live_child(pod, trial.rng)
    if victim:
        os.kill(victim["pid"], signal.SIGKILL)
    trial.notes.append(f"killed child of {victim['run_id']}" if victim else "no child running")
    time.sleep(trial.rng.uniform(0.1, 1.5))
    trial.shutdown([pod])
    if victim:
        ended = pod.events("attempt ended", run_id=victim["run_id"], attempt=victim["attempt"])
        assert ended and ended[0]["outcome"] in ("crashed", "succeeded"), \
            f"child {victim} was SIGKILLed; its attempt ended {ended}"
    return pod


def live_child(pod, rng):
    ended = {(e["run_id"], e["attempt"]) for e in pod.events("attempt ended")}
    live = [e for e in pod.events("attempt started")
            if (e["run_id"], e["attempt"]) not in ended and process_exists(e["pid"])]
    return rng.choice(live) if live else None


def fault_sigterm_during_restore(trial, pod):
    """A plain SIGTERM, then the next instance is signalled while it restores
    (a slow remote makes the restore last long enough to be hit)."""
    fault_sigterm(trial, pod)
    trial.remote.latency = trial.rng.uniform(0.02, 0.08)
    try:
        restorer = trial.start(trial.next_disks(pod)[0], "restore")
        time.sleep(trial.rng.uniform(0, 0.5))
        trial.shutdown([restorer])
    finally:
        trial.remote.latency = 0.0
    msgs = [e.get("msg") for e in restorer.events()]
    during = "ready" not in msgs or msgs.index("shutdown signal") < msgs.index("ready")
    trial.notes.append(f"signal {'during' if during else 'after'} restore")
    return restorer


def shutdown_with_remote(trial, pod, mode):
    time.sleep(trial.plan.fault_delay)
    trial.remote.set_mode(mode)
    try:
        trial.shutdown([pod], remote_ok=False)
    finally:
        trial.remote.set_mode("up")
    return pod


def fault_remote_down(trial, pod):
    return shutdown_with_remote(trial, pod, "down")


def fault_remote_hung(trial, pod):
    """The remote accepts connections and never answers: serve must still
    exit within the grace period."""
    return shutdown_with_remote(trial, pod, "hung")


FAULTS = {
    "sigterm": fault_sigterm,
    "sigint": fault_sigint,
    "double_sigterm": fault_double_sigterm,
    "sigkill_serve": fault_sigkill_serve,
    "sigkill_child": fault_sigkill_child,
    "sigterm_during_restore": fault_sigterm_during_restore,
    "remote_down": fault_remote_down,
    "remote_hung": fault_remote_hung,
}


# --------------------------------------------------------------------------
# running trials


def run_trial(plan, root):
    """Runs one trial in `root`; raises AssertionError naming the seed and the
    broken invariant, with the serve logs kept under root/logs."""
    root = Path(root)
    trial = None
    try:
        with start_git_daemon(root / "remote") as daemon:
            remote = FlakyRemote(daemon.port)
            trial = Trial(plan, root, remote, daemon.bare)
            try:
                write_history(daemon.bare, plan.history, plan.history_layout)
                first = trial.start(trial.new_disk(), "first")
                trial.submit_all(first)
                last = FAULTS[plan.fault](trial, first)
                disks = trial.recover(last)
                trial.check_nothing_runs_again(disks)
            finally:
                trial.kill_everything()
                remote.stop()
                trial.write_logs()
    except Exception as e:  # noqa: BLE001 -- every failure is reported with its seed
        raise failure("chaos", plan, e, root / "logs" if trial else root) from None
    return trial


@pytest.mark.parametrize("plan", ci_plans(plan_trial, CI_TRIALS, DEFAULT_SEED),
                         ids=lambda p: f"{p.index}-{p.fault}")
def test_chaos_trial(plan, tmp_path):
    print(plan.describe())
    print(run_trial(plan, tmp_path).summary())


def main(argv=None):
    parser = argument_parser(__doc__.split("\n\n")[0], FAULTS)
    parser.add_argument("--history-one-in", type=int, default=0, metavar="K",
                        help=f"one trial in K starts on {HISTORY_RUNS} finished runs (default: none)")
    parser.add_argument("--history-layout", type=int, choices=(1, 2), default=1,
                        help="the index layout that lists those runs (default: 1)")
    args = parse_args(parser, argv)
    plans = plans_of(args, plan_trial, history_one_in=args.history_one_in,
                     history_layout=args.history_layout)
    return run_trials("chaos", args, plans, run_trial,
                      lambda plan: {"restarts": f"{plan.disk} disk, {plan.restart}"})


if __name__ == "__main__":
    sys.exit(main())
