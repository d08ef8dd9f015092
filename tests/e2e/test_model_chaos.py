#!/usr/bin/python3
"""Seeded chaos trials of the model path (issue 46, point 6): faults of the
provider, of children and of the journal, drawn at random, with the
promises of SPEC §13 checked after every trial.

Why this file exists: test_model_journal*.py pin each known fault down one
at a time; these trials mix them with SIGTERMs, retries and calls in flight
at random moments, to find what nobody has written a test for yet.

One trial (every choice drawn from the trial's seed):

1. pod-a starts on an empty results repo (a `git daemon`), with a fake
   provider (tests/support/inflight_testing/model_provider.py) whose calls
   take 0.1 to 0.9 s, and gets 2 or 3 runs of children/model_eval.py, 1 to
   8 workers making calls at once, streaming or not, retrying a failed call
   as an SDK does; each run's child either resumes (asks only the cases it
   lacks) or has no resume of its own (asks every case again, each attempt).
2. One fault: a SIGTERM at a random moment; a SIGTERM with 50 calls in
   flight; the provider hanging on some calls (then a SIGTERM while they
   hang); the provider resetting streams midway, or answering 429 or 500
   (then, once the children saw it, a SIGTERM); a child SIGKILLed mid-call
   (then a SIGTERM); or a SIGTERM and then a journal file cut short on the
   kept disk.
3. pod-b starts on the kept disk or on a wiped one and finishes every run;
   then it gets a SIGTERM too.

Invariants:
- no call paid twice after a SIGTERM: a prompt is answered in full (200,
  the whole body) once; twice only when its first whole answer ended as
  pod-a's flush window ran out (a call the window cut costs once more, and
  a hung one is paid exactly twice), its child was SIGKILLed with it in
  flight, or the journal line of its answer was cut off; never three times;
- no error and no cut stream is ever replayed: every call answered from
  the journal ended 200 and "ok", and every answer in a published journal
  is a 200, a stream to its `data: [DONE]`;
- serve never goes down and never skips a checkpoint: every pod exits 0,
  within grace period + 2 s, leaves no process behind, and every run it
  leaves unfinished has a branch holding its disk's index.jsonl;
- each case has exactly one record in the published result, with the
  provider's answer to it.

Running it:
    tests/support/python -m pytest tests/e2e/test_model_chaos.py   # CI: 7 trials, fixed seed
    tests/support/python tests/e2e/test_model_chaos.py --trials 200 --seed 12345 [--jobs 4]
    tests/support/python tests/e2e/test_model_chaos.py --seed 12345 --only-trial 17
A failing trial prints its seed, what it drew, and the command that reruns
it alone. Binaries come from INFLIGHT_BIN_DIR (default build/bin).
"""

import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import CHILDREN, INFLIGHT, PYTHON
from inflight_testing.git_servers import branches, git, start_git_daemon
from inflight_testing.model_provider import ModelProvider
from inflight_testing.procfs import kill_tagged, tagged_processes
from inflight_testing.seeded_trials import (argument_parser, ci_plans, failure, fault_for,
                                            parse_args, plans_of, run_trials)
from inflight_testing.serve import Serve
from inflight_testing.waiting import wait_for
from test_model_journal import journal_entry, journal_records

DEFAULT_SEED = 20261129
CI_TRIALS = 7  # one of each fault
RATE_LIMIT_WAIT = 1  # seconds: the provider's Retry-After with a 429
GRACE_S = 6
FLUSH_S = 2
SHUTDOWN_SLACK_S = 2
# A whole answer that ended this close to the window's end may have been cut
# by it on serve's side although the provider finished writing it.
WINDOW_SLACK_S = 0.25
KEY_ENV = "PROVIDER_KEY"
# A child's retries of a failed call; a fault queues at most this many, so that
# no case runs out of tries (a child that gives up exits 1, and its run fails).
RETRIES = 3
TAG_VAR = "CHAOS_POD_TAG"
JOURNAL = Path(".inflight") / "model-calls"


@dataclass(frozen=True)
class RunSpec:
    run_id: str
    cases: int
    workers: int
    stream: bool
    child: str  # "resumes" (asks only what it lacks) or "restarts" (asks everything again)

    def prompt(self, case):
        return f"{self.run_id}/case-{case}"


@dataclass
class TrialPlan:
    index: int
    seed: int
    master_seed: object
    fault: str
    disk: str  # "kept" or "wiped": what pod-b starts on
    delay: float
    fault_delay: float
    runs: list
    rng: random.Random = field(repr=False)

    def describe(self):
        runs = [(r.cases, r.workers, "stream" if r.stream else "json", r.child) for r in self.runs]
        return (f"trial {self.index}: fault={self.fault} disk={self.disk} runs={runs} "
                f"delay={self.delay:.2f}s fault_delay={self.fault_delay:.2f}s trial_seed={self.seed}")

    def rerun(self):
        script = "tests/support/python tests/e2e/test_model_chaos.py"
        if self.master_seed is None:
            return f"{script} --trial-seed {self.seed} --fault {self.fault}"
        return f"{script} --seed {self.master_seed} --only-trial {self.index}"


def plan_trial(master_seed, index, fault=None, seed=None):
    if seed is None:
        seed = random.Random(f"{master_seed}:{index}").getrandbits(32)
    rng = random.Random(seed)
    fault = fault or fault_for(master_seed, index, FAULTS)
    delay = rng.uniform(0.1, 0.9)
    if fault == "sigterm_50_in_flight":  # calls long enough for 50 workers to have 50 out
        runs = [RunSpec(f"m{index}-{n}", 100, 25, rng.random() < 0.5, "resumes")
                for n in range(2)]
        delay = rng.uniform(1.0, 1.5)
    else:
        runs = [RunSpec(f"m{index}-{n}", rng.randint(6, 24), rng.randint(1, 8), rng.random() < 0.5,
                        rng.choice(["resumes", "restarts"])) for n in range(rng.randint(2, 3))]
    disk = "kept" if fault == "journal_truncated" else rng.choice(["kept", "wiped"])
    return TrialPlan(index=index, seed=seed, master_seed=master_seed, fault=fault, disk=disk,
                     delay=delay, fault_delay=rng.uniform(0.3, 2.5), runs=runs,
                     rng=rng)


class Trial:
    """The provider, the pods and what each fault excused, then the checks."""

    def __init__(self, plan, root, provider, repo_url, bare):
        self.plan = plan
        self.rng = plan.rng
        self.root = root
        self.provider = provider
        self.repo_url = repo_url
        self.bare = bare
        self.key = provider.api_key
        self.pods = []
        self.sigterm_at = []  # time.monotonic() of each SIGTERM to a pod
        self.exited_at = []  # and of each pod's exit after it
        self.excused = set()  # prompts a fault may make pay twice
        self.notes = []
        self.after_recovery = []  # checks a fault adds, run after pod-b's SIGTERM

    def config(self):
        path = self.root / "config.json"
        def integer(default):
            return {"type": "integer", "min": 0, "max": 1000, "default": default}
        def template(resume_argv):
            return {
                "argv": [PYTHON, str(CHILDREN / "model_eval.py"), "--output", "{output_dir}",
                         "--cases", "{cases}", "--workers", "{workers}", "--stream", "{stream}",
                         "--prefix", "{run_id}", "--retries", str(RETRIES)],
                "resume_argv": resume_argv,
                "env": {"OPENAI_BASE_URL": "{model_url:openai}/v1", "OPENAI_API_KEY": "{model_key}"},
                "inherit_env": [TAG_VAR],
                "params": {"cases": integer(10), "workers": integer(1), "stream": integer(0)},
                "progress_file": "index.jsonl"}
        path.write_text(json.dumps({
            "models": {"openai": {"upstream": self.provider.url, "api_key_env": KEY_ENV}},
            "children": {"resumes": template(["--resume"]), "restarts": template([])}}))
        return path

    def start(self, name, disk):
        disk.mkdir(exist_ok=True)
        tag = uuid.uuid4().hex
        serve = Serve(disk, ["--config", str(self.config()), "--pod-name", name,
                             "--results-repo", self.repo_url, "--checkpoint-interval", "500ms",
                             "--grace-period", f"{GRACE_S}s", "--flush-window", f"{FLUSH_S}s",
                             "--max-attempts", "20", "--max-concurrent", "3"],
                      env={KEY_ENV: self.key, TAG_VAR: tag}, binary=INFLIGHT)
        serve.tag, serve.name, serve.exit_code = tag, name, None
        self.pods.append(serve)
        serve.wait_ready(timeout=60)
        return serve

    def submit_all(self, pod):
        for run in self.plan.runs:
            pod.submit(id=run.run_id, child=run.child, cases=run.cases, workers=run.workers,
                       stream=int(run.stream))

    def sigterm(self, pod):
        """SIGTERM; the pod must exit 0 (the remote is up) within grace + 2 s
        and leave no process of its own behind."""
        started = time.monotonic()
        self.sigterm_at.append(started)
        pod.signal(signal.SIGTERM)
        limit = GRACE_S + SHUTDOWN_SLACK_S
        try:
            pod.exit_code = pod.wait_exit(timeout=limit + 10)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{pod.name}: still running {limit + 10}s after SIGTERM") from None
        self.exited_at.append(time.monotonic())
        took = self.exited_at[-1] - started
        assert took <= limit, f"{pod.name}: shutdown took {took:.2f}s, over grace + 2s"
        assert pod.exit_code == 0, f"{pod.name}: exit {pod.exit_code} with the remote up"
        try:
            wait_for(lambda: not tagged_processes(TAG_VAR, pod.tag), 2, "no process left")
        except AssertionError:
            raise AssertionError(f"{pod.name} exited and left {tagged_processes(TAG_VAR, pod.tag)}") from None
        self.check_saved(pod)

    def check_saved(self, pod):
        """Exit 0 means every checkpoint landed: each run the pod leaves
        unfinished on its disk has a branch whose index.jsonl is the disk's."""
        for params_file in (pod.workdir / ".inflight" / "runs").glob("*/run-params.json"):
            run_dir = params_file.parent
            if "final_status" in json.loads(params_file.read_text()):
                continue
            ref = f"refs/heads/inflight/{pod.name}/{run_dir.name}"
            assert ref in branches(self.bare), \
                f"{pod.name} exited 0 but run {run_dir.name} has no {ref}"
            # An empty progress file is saved empty: absent stands only for absent.
            saved = self.file_at(ref, "index.jsonl")
            local = (run_dir / "index.jsonl").read_text() if (run_dir / "index.jsonl").exists() \
                else None
            assert saved == local, \
                (f"{pod.name} exited 0 but run {run_dir.name}'s last checkpoint is not on {ref}: "
                 f"{(saved or '')[-300:]!r} there, "
                 f"{(local or '')[-300:]!r} on disk")

    def wait_calls(self, n, timeout=30):
        wait_for(lambda: len(self.provider.in_flight()) >= n, timeout, f"{n} calls in flight")

    def file_at(self, ref, path):
        """The text of `path` in `ref`'s tree, None when it has none."""
        try:
            return git(self.bare, "show", f"{ref}:{path}")
        except AssertionError:
            return None

    def published(self):
        refs = git(self.bare, "for-each-ref", "--format=%(refname)", "refs/inflight-results/")
        return {ref.rsplit("/", 1)[1] for ref in refs.split()}

    def finish(self, pod):
        """Every run published, by pod-b or already by pod-a."""
        ids = {run.run_id for run in self.plan.runs}

        def done():
            assert pod.proc.poll() is None, f"{pod.name} exited {pod.proc.poll()} while finishing"
            return ids <= self.published()
        wait_for(done, 120, "every run published", interval=0.1)

    # checks

    def check_ledger(self):
        """A prompt is answered in full once; twice only when a fault excuses
        it or its first whole answer ended as pod-a's flush window ran out
        (between the window's end, less WINDOW_SLACK_S, and pod-a's exit);
        never three times."""
        whole = defaultdict(list)  # prompt -> end times of its whole 200 answers
        for e in self.provider.ledger():
            if e["status"] == 200 and e["completed"]:
                whole[e["prompt"]].append(e["ended"])
        cut_from = self.sigterm_at[0] + FLUSH_S - WINDOW_SLACK_S
        for prompt, ends in whole.items():
            first = min(ends)
            cut = cut_from <= first <= self.exited_at[0]
            allowed = 2 if prompt in self.excused or cut else 1
            assert len(ends) <= allowed, \
                (f"{prompt} paid {len(ends)} times in full, its first answer whole at "
                 f"{first - self.sigterm_at[0]:+.2f}s from pod-a's SIGTERM (window {FLUSH_S}s)")

    def check_replays(self):
        """Nothing but whole answers replayed, by the log; and nothing but
        whole answers recorded in any published journal."""
        for pod in self.pods:
            for e in pod.events():
                if e.get("msg") == "model call ended" and e.get("source") == "journal":
                    assert e.get("status") == 200 and e.get("outcome") == "ok", \
                        f"{pod.name} replayed what was not a whole answer: {e}"
        for run in self.plan.runs:
            for record in self.published_journal(run.run_id):
                whole = record["status"] == 200 and (
                    not record["stream"] or record["body"].endswith("data: [DONE]\n\n"))
                assert whole, f"run {run.run_id} recorded what is not a whole answer: {record}"

    def published_journal(self, run_id):
        """The entries of the run's published journal, segment after segment."""
        ref = f"refs/inflight-results/{run_id}"
        if self.file_at(ref, JOURNAL) is None:  # no call was ever recorded
            return []
        names = git(self.bare, "ls-tree", "--name-only", f"{ref}:{JOURNAL}").split()
        return [journal_entry(record) for n in names for _, record in
                journal_records(git(self.bare, "show", f"{ref}:{JOURNAL}/{n}", binary=True))]

    def check_results(self):
        for run in self.plan.runs:
            text = self.file_at(f"refs/inflight-results/{run.run_id}", "index.jsonl")
            assert text is not None, f"run {run.run_id}: no published index.jsonl"
            assert text.endswith("\n"), f"run {run.run_id}: torn last line {text[-80:]!r}"
            lines = [json.loads(line) for line in text.splitlines()]
            counts = Counter(line["case"] for line in lines)
            twice = sorted(c for c, n in counts.items() if n > 1)
            missing = sorted(set(range(run.cases)) - set(counts))
            assert not twice and not missing, \
                f"run {run.run_id}: cases twice {twice}, missing {missing}"
            for line in lines:
                words = line["answer"].split()
                assert words == ["answer", "to", run.prompt(line["case"])], \
                    f"run {run.run_id} case {line['case']}: answer {line['answer']!r}"

    def summary(self):
        paid = len(self.provider.ledger())
        calls = sum(r.cases for r in self.plan.runs)
        replayed = sum(1 for pod in self.pods for e in pod.events()
                       if e.get("msg") == "model call ended" and e.get("source") == "journal")
        return (f"{calls} cases, {paid} calls paid, {replayed} replayed; excused "
                f"{len(self.excused)}{''.join(f'; {n}' for n in self.notes)}")

    def kill_everything(self):
        for pod in self.pods:
            if pod.proc.poll() is None:
                pod.proc.kill()
            kill_tagged(TAG_VAR, pod.tag)

    def write_logs(self):
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        for pod in self.pods:
            (logs / f"{pod.name}.log").write_text("".join(pod.lines))
        return logs


# --------------------------------------------------------------------------
# faults: each acts on pod-a, which ends with a SIGTERM


def fault_sigterm(trial, pod):
    trial.wait_calls(1)
    time.sleep(trial.plan.fault_delay)
    trial.sigterm(pod)


def fault_sigterm_50_in_flight(trial, pod):
    trial.wait_calls(50)
    trial.notes.append(f"{len(trial.provider.in_flight())} calls in flight at SIGTERM")
    trial.sigterm(pod)


def fault_provider_hangs(trial, pod):
    """Hung calls outlast the flush window: each costs once more, no more."""
    trial.provider.hang_next(n=trial.rng.randint(1, 3))
    wait_for(lambda: [e for e in trial.provider.in_flight() if e["fault"] == "hang"], 30,
             "a hung call")
    time.sleep(trial.rng.uniform(0, 1))
    trial.sigterm(pod)
    trial.provider.clear_faults()
    hung = {e["prompt"] for e in trial.provider.ledger() if e["fault"] == "hang"}
    trial.notes.append(f"{len(hung)} hung")
    trial.after_recovery.append(lambda: check_paid_once_more(trial, hung))


def check_paid_once_more(trial, prompts):
    for prompt in prompts:
        paid = trial.provider.paid(prompt)
        assert paid == 2, f"{prompt} hung past the window and was paid {paid} times, not 2"


def faults_then_sigterm(trial, pod, kind, n):
    """The SIGTERM comes after the first n calls took their fault (and the
    children saw it), so that their retries meet the shutdown."""
    wait_for(lambda: sum(1 for e in trial.provider.ledger()
                         if e["fault"] == kind and e["ended"] is not None) >= n,
             30, f"{n} calls answered with fault {kind}")
    time.sleep(trial.plan.fault_delay)
    trial.sigterm(pod)


def fault_provider_resets(trial, pod):
    n = trial.rng.randint(1, RETRIES)
    trial.provider.reset_mid_stream_next(n=n)
    faults_then_sigterm(trial, pod, "reset", n)


def fault_provider_errors(trial, pod):
    status, n = trial.rng.choice([429, 500]), trial.rng.randint(1, RETRIES)
    trial.provider.fail_next(status=status, n=n)
    trial.notes.append(f"{n} x status {status}")
    faults_then_sigterm(trial, pod, "status", n)
    if status == 429:
        trial.after_recovery.append(lambda: check_retried_after(trial, RATE_LIMIT_WAIT))


def check_retried_after(trial, seconds):
    """A prompt answered 429 is asked again by the child that got the 429
    no sooner than its Retry-After. (The next pod's child never saw it.)"""
    ledger = trial.provider.ledger()
    first_pod_gone = trial.exited_at[0]
    for limited in (e for e in ledger if e["fault_status"] == 429):
        later = [e["started"] for e in ledger
                 if e["prompt"] == limited["prompt"] and e["serial"] > limited["serial"] and
                 e["started"] < first_pod_gone]
        assert not later or min(later) >= limited["ended"] + seconds - 0.05, \
            f"{limited['prompt']} asked again {min(later) - limited['ended']:.2f}s after its 429"


def fault_child_killed(trial, pod):
    """A child SIGKILLed with calls in flight, outside a shutdown: those calls
    end with it (and may be paid again by the next attempt)."""
    trial.wait_calls(1)
    time.sleep(trial.rng.uniform(0, 1))
    children = [(pid, cmd) for pid, cmd in tagged_processes(TAG_VAR, pod.tag) if "model_eval.py" in cmd]
    if children:
        pid, cmd = trial.rng.choice(children)
        run_id = cmd.split("--prefix ")[1].split()[0]
        killed_at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        trial.excused |= {e["prompt"] for e in trial.provider.ledger()
                          if e["prompt"].startswith(run_id + "/") and e["started"] <= killed_at
                          and (e["ended"] is None or e["ended"] >= killed_at - 0.05)}
        trial.notes.append(f"killed the child of {run_id}")
    time.sleep(trial.plan.fault_delay)
    trial.sigterm(pod)


def fault_journal_truncated(trial, pod):
    """A SIGTERM, then one journal file of the kept disk cut short: a torn
    line is dropped, or the journal is unreadable and nothing is replayed;
    either way the run goes on and serve does not go down."""
    trial.wait_calls(1)
    time.sleep(trial.plan.fault_delay)
    trial.sigterm(pod)
    files = sorted(p for p in (pod.workdir / ".inflight" / "runs").glob(f"*/{JOURNAL}/*")
                   if p.is_file() and p.stat().st_size > 0)
    if not files:
        trial.notes.append("no journal to truncate")
        return
    victim = trial.rng.choice(files)
    data = victim.read_bytes()
    cut = trial.rng.randint(0, len(data) - 1)
    victim.write_bytes(data[:cut])
    run_id = victim.relative_to(pod.workdir / ".inflight" / "runs").parts[0]
    segments = sorted(victim.parent.glob("calls-*.jsonl"))
    if victim != segments[-1]:  # a torn record mid-journal: nothing of the run is replayed
        lost = data
    else:  # the records from the torn one on are lost: their answers name their prompts
        lost = data[max(at for at, _ in journal_records(data) if at <= cut):]
    cases = {int(c) for c in re.findall(rb"%s/case-(\d+)" % re.escape(run_id.encode()), lost)}
    trial.excused |= {f"{run_id}/case-{c}" for c in cases}
    trial.notes.append(f"cut {victim.name} of {run_id} at {cut} of {len(data)} bytes, "
                       f"{len(cases)} answers lost")


FAULTS = {
    "sigterm": fault_sigterm,
    "sigterm_50_in_flight": fault_sigterm_50_in_flight,
    "provider_hangs": fault_provider_hangs,
    "provider_resets": fault_provider_resets,
    "provider_errors": fault_provider_errors,
    "child_killed": fault_child_killed,
    "journal_truncated": fault_journal_truncated,
}


# --------------------------------------------------------------------------
# running trials


def run_trial(plan, root):
    root = Path(root)
    trial = None
    try:
        with start_git_daemon(root / "remote") as daemon, \
                ModelProvider(api_key=f"sk-test-{secrets.token_hex(20)}", delay=plan.delay) as provider:
            trial = Trial(plan, root, provider, daemon.url, daemon.bare)
            try:
                first = trial.start("pod-a", root / "disk-a")
                trial.submit_all(first)
                FAULTS[plan.fault](trial, first)
                if plan.disk == "wiped":
                    shutil.rmtree(root / "disk-a")
                second = trial.start("pod-b", root / "disk-a")
                trial.finish(second)
                trial.sigterm(second)
                trial.check_ledger()
                trial.check_replays()
                trial.check_results()
                for check in trial.after_recovery:
                    check()
            finally:
                trial.kill_everything()
                trial.write_logs()
    except Exception as e:  # noqa: BLE001 -- every failure is reported with its seed
        raise failure("model chaos", plan, e, root / "logs") from None
    return trial


@pytest.mark.parametrize("plan", ci_plans(plan_trial, CI_TRIALS, DEFAULT_SEED),
                         ids=lambda p: f"{p.index}-{p.fault}")
def test_model_chaos_trial(plan, tmp_path):
    print(plan.describe())
    print(run_trial(plan, tmp_path).summary())


def main(argv=None):
    args = parse_args(argument_parser(__doc__.split("\n\n")[0], FAULTS), argv)
    return run_trials("model-chaos", args, plans_of(args, plan_trial), run_trial,
                      lambda plan: {"disks": plan.disk})


if __name__ == "__main__":
    sys.exit(main())
