"""`inflight run` (docs/run.md): one
run in the foreground. SIGTERM part-way exits 75 with a shutdown checkpoint;
the same command on a wiped disk resumes it with its resume argument to
every record once, publishes it and deletes its branch; a third time it exits
0 at once; a failing child exits 1, published failed; a live holder is waited
for; bad input exits 2 with nothing written or pushed."""
import json
import os
import signal
import subprocess
import time

import pytest

from inflight_testing.git_servers import REPO_NAME, GitDaemon, branches, free_port, git
from inflight_testing.procfs import descendants_of
from inflight_testing.results_index import index_entry
from inflight_testing.run_dirs import index_ids
from inflight_testing.waiting import wait_for
from conftest import DEMO, INFLIGHT, write_config

TESTS = 40


class RunProcess:
    """`inflight run ARGS` as a Job's container runs it, on its own disk."""

    def __init__(self, tmp_path, server, pod, *args, run_id="suite-0", extra_env=None):
        self.runs = tmp_path / pod / "runs"
        self.run_id = run_id
        env = {k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")}
        env.update(extra_env or {})
        argv = [str(INFLIGHT), "run", "--id", run_id, "--pod-name", pod,
                "--results-repo", server.url, *server.flags, "--runs-dir", str(self.runs),
                "--log-format", "json", "--checkpoint-interval", "200ms", *args]
        self.log = tmp_path / f"{pod}.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env)

    def events(self):
        events = []
        for line in self.log.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                pass  # the child's own output, streamed
        return events

    def logged(self, message):
        return any(e.get("msg") == message for e in self.events())

    def records(self):
        index = self.runs / self.run_id / "index.jsonl"
        return len(index.read_text().splitlines()) if index.exists() else 0

    def wait(self, timeout=90):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("inflight run did not exit:\n" + self.log.read_text()[-4000:])


def demo_command(tests=TESTS, test_ms=50):
    return ["--resume-arg", "--resume", "--progress-file", "index.jsonl", "--",
            str(DEMO), "--output", "{output_dir}", "--tests", str(tests), "--test-ms", str(test_ms)]


def result_ref(run_id):
    return f"refs/inflight-results/{run_id}"


def published_records(server, run_id):
    text = git(server.bare, "show", f"{result_ref(run_id)}:index.jsonl")
    return [json.loads(line)["test_id"] for line in text.splitlines()]


def test_sigterm_exits_75_and_the_same_command_resumes_publishes_and_then_starts_nothing(
        tmp_path, git_daemon):
    first = RunProcess(tmp_path, git_daemon, "job-0-try-1", *demo_command())
    wait_for(lambda: first.records() >= 3, 30, "three records")
    first.proc.send_signal(signal.SIGTERM)
    assert first.wait() == 75, first.log.read_text()[-3000:]
    tip = branches(git_daemon.bare)["refs/heads/inflight/job-0-try-1/suite-0"]
    assert git(git_daemon.bare, "log", "-1", "--format=%s", tip).strip().endswith("(shutdown)")

    # The Job's next pod: another name, an empty disk.
    second = RunProcess(tmp_path, git_daemon, "job-0-try-2", *demo_command())
    assert second.wait() == 0, second.log.read_text()[-3000:]
    params = json.loads((second.runs / "suite-0" / "run-params.json").read_text())
    assert [a["pod"] for a in params["attempts"]] == ["job-0-try-1", "job-0-try-2"]
    assert "--resume" in params["argv"]
    records = published_records(git_daemon, "suite-0")
    assert sorted(records) == [f"t{n:03d}" for n in range(1, TESTS + 1)], records
    assert not branches(git_daemon.bare)
    assert index_entry(git_daemon.bare, "suite-0")["final_status"] == "succeeded"
    # The child's output went to the terminal as well as to console.log.
    assert "inflight-demo-eval: all 40 tests done" in second.log.read_text()

    third = RunProcess(tmp_path, git_daemon, "job-0-try-3", *demo_command())
    assert third.wait() == 0, third.log.read_text()[-3000:]
    assert not third.logged("attempt started")
    assert third.logged("the run is finished and published; it does not run again")


def test_a_failing_child_exits_1_and_is_published_failed(tmp_path, git_daemon):
    run = RunProcess(tmp_path, git_daemon, "pod-a", "--", "/bin/sh", "-c", "echo no; exit 3")
    assert run.wait() == 1, run.log.read_text()[-3000:]
    entry = index_entry(git_daemon.bare, "suite-0")
    assert entry["final_status"] == "failed"
    assert git(git_daemon.bare, "show", f"{result_ref('suite-0')}:console.log").count("no\n") == 1
    assert not branches(git_daemon.bare)


def test_the_config_form_types_its_params(tmp_path, git_daemon):
    config = write_config(tmp_path / "c.json", {
        "argv": [str(DEMO), "--output", "{output_dir}", "--tests", "{tests}",
                 "--test-ms", "{test_ms}"],
        "resume_argv": ["--resume"],
        "params": {"tests": {"type": "integer", "min": 1, "max": 100, "required": True},
                   "test_ms": {"type": "integer", "default": 1}},
        "progress_file": "index.jsonl"})
    run = RunProcess(tmp_path, git_daemon, "pod-a", "--config", str(config),
                     "--param", "tests=7", "--param", "test_ms=1", run_id="cfg-1")
    assert run.wait() == 0, run.log.read_text()[-3000:]
    assert sorted(published_records(git_daemon, "cfg-1")) == [f"t{n:03d}" for n in range(1, 8)]
    params = json.loads(git(git_daemon.bare, "show", f"{result_ref('cfg-1')}:run-params.json"))
    assert params["request"] == {"tests": 7, "test_ms": 1}  # typed as declared


def test_a_live_holder_is_waited_for_and_its_published_run_not_run_again(tmp_path, git_daemon):
    holder = RunProcess(tmp_path, git_daemon, "pod-a", *demo_command(tests=30, test_ms=50))
    wait_for(lambda: holder.records() >= 2, 30, "the holder's run to start")
    wait_for(lambda: branches(git_daemon.bare), 30, "the holder's first checkpoint")
    waiter = RunProcess(tmp_path, git_daemon, "pod-b", *demo_command(tests=30, test_ms=50))
    wait_for(lambda: waiter.logged(
        "another instance holds this run; waiting for its lease or claim to end "
        "(--take-over takes it at once)"), 30, "the second command to wait")
    assert holder.wait() == 0, holder.log.read_text()[-3000:]
    assert waiter.wait() == 0, waiter.log.read_text()[-3000:]
    assert not waiter.logged("attempt started")


def test_a_run_whose_pod_was_killed_is_taken_when_its_lease_ends(tmp_path, git_daemon):
    short = ("--grace-period", "3s", "--flush-window", "1s")
    lost = RunProcess(tmp_path, git_daemon, "pod-a", *short, *demo_command(test_ms=100))
    wait_for(lambda: branches(git_daemon.bare) and lost.records() >= 3, 30, "a checkpoint")
    lost.proc.kill()  # a node lost: no shutdown, its lease stays
    lost.wait()
    started = time.monotonic()
    taker = RunProcess(tmp_path, git_daemon, "pod-b", *short, *demo_command(test_ms=100))
    assert taker.wait(timeout=120) == 0, taker.log.read_text()[-3000:]
    assert taker.logged("another instance holds this run; waiting for its lease or claim to end "
                        "(--take-over takes it at once)")
    # Its lease: 3 renewals of 1 s and the 3 s grace, watched from the first look.
    assert time.monotonic() - started >= 5
    assert sorted(published_records(git_daemon, "suite-0")) == \
        [f"t{n:03d}" for n in range(1, TESTS + 1)]


@pytest.mark.parametrize("args, says", [
    (["--id", "no spaces allowed"], "--id: 'no spaces allowed' is not a run id"),
    (["--id", "x"], "no command"),
    (["--id", "x", "--resume-arg", "--resume"], "go with a command after --"),
    (["--id", "x", "--child", "default", "--", "/bin/true"], "at once: give one"),
    (["--id", "x", "--inherit-env", "INFLIGHT_API_TOKEN", "--", "/bin/true"], "INFLIGHT_API_TOKEN"),
    (["--id", "x", "--env", "NOEQUALS", "--", "/bin/true"], "is not NAME=VALUE"),
    (["--id", "x", "--config", "{config}", "--param", "bogus=1"],
     "bogus is not a declared param of template 'default'"),
    (["--id", "x", "--config", "{config}", "--param", "tests=many"], "'many' is not an integer"),
    (["--id", "x", "--config", "{config}", "--param", "tests=1000"], "tests must be at most 100"),
    (["--id", "x", "--config", "{config}", "--child", "nope"], "no template named 'nope'"),
    (["--id", "x", "--", "/bin/echo", "{nonsense}"], "nonsense"),
])
def test_bad_input_exits_2_naming_it_with_nothing_written_or_pushed(tmp_path, git_daemon,
                                                                    args, says):
    config = write_config(tmp_path / "c.json", {
        "argv": [str(DEMO), "--output", "{output_dir}", "--tests", "{tests}"],
        "params": {"tests": {"type": "integer", "min": 1, "max": 100, "default": 3}}})
    runs = tmp_path / "runs"
    argv = [str(INFLIGHT), "run", "--results-repo", git_daemon.url, "--runs-dir", str(runs),
            *[a.replace("{config}", str(config)) for a in args]]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r
    assert says in r.stderr, r.stderr
    assert not runs.exists()
    assert not git(git_daemon.bare, "for-each-ref").strip()


def test_a_deferring_child_exits_75_with_its_state_landed(tmp_path, git_daemon):
    """The child asks to be run later (a retry exit code): the command pushes
    its state and exits 75, for the Job's next pod to resume."""
    config = write_config(tmp_path / "c.json", {
        "argv": ["/bin/sh", "-c", "echo busy; exit 75"], "retry_exit_codes": [75]})
    run = RunProcess(tmp_path, git_daemon, "pod-a", "--config", str(config))
    assert run.wait() == 75, run.log.read_text()[-3000:]
    tip = branches(git_daemon.bare)["refs/heads/inflight/pod-a/suite-0"]
    params = json.loads(git(git_daemon.bare, "show", f"{tip}:run-params.json"))
    assert [a["outcome"] for a in params["attempts"]] == ["deferred"]
    assert not git(git_daemon.bare, "for-each-ref", "refs/inflight-results/").strip()


def test_take_over_takes_a_live_run_at_once_and_fences_its_holder(tmp_path, git_daemon):
    # The holder records one test a second, so that it is still running when
    # the taker claims the run however slowly the taker starts (under ASan on
    # a busy machine it took over 5 s, and a holder of 6 s had finished).
    holder = RunProcess(tmp_path, git_daemon, "pod-a", *demo_command(tests=60, test_ms=1000))
    wait_for(lambda: branches(git_daemon.bare) and holder.records() >= 3, 30, "a checkpoint")
    taker = RunProcess(tmp_path, git_daemon, "pod-b", "--take-over",
                       *demo_command(tests=60, test_ms=100))
    assert taker.wait() == 0, taker.log.read_text()[-3000:]
    assert not taker.logged("another instance holds this run; waiting for its lease or claim "
                            "to end (--take-over takes it at once)")
    assert holder.wait() == 75, holder.log.read_text()[-3000:]  # fenced: not its run any more
    assert sorted(published_records(git_daemon, "suite-0")) == \
        [f"t{n:03d}" for n in range(1, 61)]


# Run by upload-pack in place of `git pack-objects`: once armed, the first
# fetch (with `.always`, every fetch) moves pod-a's branch to a new commit on
# top, as the holder's periodic checkpoint landing between the taker's
# listing and its claim would.
HOLDER_CHECKPOINTS_MID_FETCH = """#!/bin/sh
if rm "$0.armed" 2>/dev/null || [ -e "$0.always" ]; then
  ref=refs/heads/inflight/pod-a/suite-0
  tip=$(git rev-parse "$ref")
  moved=$(git log -1 --format=%B "$tip" | git commit-tree -p "$tip" "$tip^{tree}")
  git update-ref "$ref" "$moved" "$tip"
fi
exec "$@"
"""


class RacingServer:
    """A git daemon whose upload-pack runs HOLDER_CHECKPOINTS_MID_FETCH;
    arm() makes the next fetch move pod-a's branch, arm(always=True) each."""

    flags = ()

    def __init__(self, tmp_path):
        hook = tmp_path / "pack-objects-hook"
        hook.write_text(HOLDER_CHECKPOINTS_MID_FETCH)
        hook.chmod(0o755)
        self.armed = tmp_path / "pack-objects-hook.armed"
        config = tmp_path / "gitconfig"
        config.write_text(f"[uploadpack]\n\tpackObjectsHook = {hook}\n")
        self.daemon = GitDaemon(tmp_path / "daemon", env={"GIT_CONFIG_GLOBAL": str(config)})
        self.bare, self.url = self.daemon.new_repo(REPO_NAME)

    def arm(self, always=False):
        (self.armed.with_suffix(".always") if always else self.armed).touch()


@pytest.fixture
def racing_server(tmp_path):
    server = RacingServer(tmp_path)
    yield server
    server.daemon.stop()


def paused_holder(tmp_path, server):
    """pod-a running the run, then paused with its child (a node frozen): its
    lease stays, and only the hook moves its branch. Returns it and what to
    resume with SIGCONT."""
    holder = RunProcess(tmp_path, server, "pod-a", *demo_command(tests=60, test_ms=100))
    wait_for(lambda: branches(server.bare) and holder.records() >= 3, 30, "a checkpoint")
    # The holder first, so that it starts nothing more; then what it started
    # that is still there (a checkpoint agent may have exited meanwhile).
    os.kill(holder.proc.pid, signal.SIGSTOP)
    paused = [holder.proc.pid]
    for pid in descendants_of(holder.proc.pid):
        try:
            os.kill(pid, signal.SIGSTOP)
            paused.append(pid)
        except ProcessLookupError:
            pass
    return holder, paused


def resume_paused(holder, paused):
    for pid in reversed(paused):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:  # killed meanwhile, with its run
            pass
    return holder.wait()


RACE_LOST = "the take-over lost a race with the holder's checkpoint; claiming its new tip"


def test_a_take_over_that_loses_its_claim_to_the_holders_checkpoint_claims_again_at_once(
        tmp_path, racing_server):
    server = racing_server
    holder, paused = paused_holder(tmp_path, server)
    before = branches(server.bare)["refs/heads/inflight/pod-a/suite-0"]
    server.arm()
    taker = RunProcess(tmp_path, server, "pod-b", "--take-over",
                       *demo_command(tests=60, test_ms=100))
    assert taker.wait() == 0, taker.log.read_text()[-3000:]
    assert not server.armed.exists()  # the race took place
    assert taker.logged("run claimed by another instance; left to it")
    assert taker.logged(RACE_LOST)
    assert not taker.logged("another instance holds this run; waiting for its lease or "
                            "claim to end (--take-over takes it at once)")
    # Fenced: its next checkpoint finds the branch released and the run
    # published, and does not create the branch again.
    assert resume_paused(holder, paused) == 75, holder.log.read_text()[-3000:]
    assert "refs/heads/inflight/pod-a/suite-0" not in branches(server.bare)
    assert sorted(published_records(server, "suite-0")) == \
        [f"t{n:03d}" for n in range(1, 61)]
    claimed = git(server.bare, "rev-list", "--first-parent", "refs/inflight-results/suite-0")
    assert before in claimed.split()


def resume_taking_over(tmp_path, server):
    """`inflight resume --take-over --restore-only` by pod "ops": its dir and result."""
    ops = tmp_path / "ops"
    ops.mkdir()
    return ops, subprocess.run(
        [str(INFLIGHT), "resume", "--log-format", "json", "--pod-name", "ops", "--results-repo",
         server.url, "--take-over", "--restore-only", "suite-0"],
        cwd=ops, capture_output=True, text=True, timeout=60)


def test_resume_take_over_that_loses_its_claim_claims_again_at_once(tmp_path, racing_server):
    server = racing_server
    holder, paused = paused_holder(tmp_path, server)
    server.arm()
    ops, r = resume_taking_over(tmp_path, server)
    assert r.returncode == 0, r.stderr
    assert not server.armed.exists()  # the race took place
    assert RACE_LOST in r.stderr
    assert (ops / ".inflight" / "runs" / "suite-0" / "run-params.json").exists()
    tip = branches(server.bare)["refs/heads/inflight/pod-a/suite-0"]
    assert "Inflight-Pod: ops" in git(server.bare, "log", "-1", "--format=%B", tip)
    assert resume_paused(holder, paused) == 75, holder.log.read_text()[-3000:]  # fenced


def test_resume_take_over_against_a_holder_that_wins_every_race_gives_up_after_five(
        tmp_path, racing_server):
    server = racing_server
    holder, paused = paused_holder(tmp_path, server)
    server.arm(always=True)
    ops, r = resume_taking_over(tmp_path, server)
    assert r.returncode == 1, r.stderr
    assert r.stderr.count(RACE_LOST) == 5, r.stderr
    assert "the take-over lost every race with the holder's checkpoints; racing no more" \
        in r.stderr
    assert "another instance claimed this run first; left to it" in r.stderr
    assert not (ops / ".inflight" / "runs" / "suite-0").exists()
    tip = branches(server.bare)["refs/heads/inflight/pod-a/suite-0"]
    assert "Inflight-Pod: ops" not in git(server.bare, "log", "-1", "--format=%B", tip)
    # Its branch moved under it (by the hook): the holder stops as fenced.
    assert resume_paused(holder, paused) == 75, holder.log.read_text()[-3000:]


def test_run_take_over_against_a_holder_that_wins_every_race_waits_and_says_why(
        tmp_path, racing_server):
    server = racing_server
    holder, paused = paused_holder(tmp_path, server)
    server.arm(always=True)
    taker = RunProcess(tmp_path, server, "pod-b", "--take-over",
                       *demo_command(tests=60, test_ms=100))
    wait_for(lambda: taker.logged(
        "another instance holds this run; waiting for its lease or claim to end "
        "(the take-over gave up racing its checkpoints)"), 60, "the taker to wait")
    assert sum(e.get("msg") == RACE_LOST for e in taker.events()) == 5
    assert taker.logged(
        "the take-over lost every race with the holder's checkpoints; racing no more")
    assert not taker.logged("another instance holds this run; waiting for its lease or "
                            "claim to end (--take-over takes it at once)")
    assert taker.records() == 0
    taker.proc.terminate()
    taker.wait()
    assert resume_paused(holder, paused) == 75, holder.log.read_text()[-3000:]  # fenced


def test_a_results_repo_unreachable_at_start_exits_3_and_starts_nothing(tmp_path):
    class Nowhere:  # nothing listens on that port
        url = f"git://127.0.0.1:{free_port()}/results.git"
        flags = ()
    run = RunProcess(tmp_path, Nowhere, "pod-a", "--git-timeout", "5s", *demo_command())
    assert run.wait() == 3, run.log.read_text()[-3000:]
    assert not run.logged("attempt started")
    assert run.logged("the results repo could not be used; nothing started")
