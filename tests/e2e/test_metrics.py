"""What an SRE sees (docs/metrics.md "Metrics"): /metrics says when this
pod's checkpoints last landed, how old its unsaved work is, when its lease
ends and what happened to runs, promtool-clean and carrying every metric the
shipped alert rules use; the start-up log says where checkpoints go, without
credentials, and warns about a results repo on a local path."""
import re
import shutil
import subprocess
import time
from pathlib import Path

from inflight_testing.git_servers import free_port
from inflight_testing.http import metric
from inflight_testing.waiting import wait_for

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "inflight-alerts.yaml"


def start(serve_factory, tmp_path, repo, *args, env=None):
    serve = serve_factory("--results-repo", repo, "--checkpoint-interval", "200ms", *args,
                          env=env)
    serve.wait_ready()
    return serve


def promtool_check(text):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed (scripts/setup --test installs Debian's prometheus)"
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_pod_whose_checkpoints_land_says_so(serve_factory, tmp_path, git_daemon):
    serve = start(serve_factory, tmp_path, git_daemon.url, *git_daemon.flags)
    run_id = serve.submit(tests=200, test_ms=20)
    serve.wait_log(lambda e: e.get("msg") == "checkpoint pushed" and e.get("run_id") == run_id, 30)
    now = time.time()
    landed = metric(serve, "inflight_checkpoint_last_landed_timestamp_seconds")
    assert now - 30 < landed <= now + 1, landed
    assert metric(serve, "inflight_lease_expiry_timestamp_seconds") > now
    assert metric(serve, "inflight_checkpoint_interval_seconds") == 0.2
    # Saved every 200 ms: what is unsaved is younger than a few intervals.
    assert metric(serve, "inflight_checkpoint_unsaved_seconds") < 5
    assert metric(serve, 'inflight_checkpoint_pushes_total{result="landed"}') >= 1
    assert metric(serve, f'inflight_run_interruptions{{run_id="{run_id}"}}') == 0
    assert metric(serve, f'inflight_run_failures{{run_id="{run_id}"}}') == 0
    text = serve.get("/metrics").body
    promtool_check(text)
    # Every metric the shipped alert rules read is there to read.
    # (The model-call series exist once the config has `models`:
    # test_model_journal.py reads them.)
    used = {name for name in re.findall(r"\binflight_[a-z_]+", RULES.read_text())
            if not name.startswith("inflight_model_")}
    exposed = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
               if line.startswith("inflight_")}
    assert used <= exposed, used - exposed


def test_a_pod_whose_checkpoints_fail_shows_its_work_at_risk(serve_factory, tmp_path):
    # Nothing listens there: every push fails, the run goes on.
    serve = start(serve_factory, tmp_path, f"git://127.0.0.1:{free_port()}/results.git",
                  "--git-timeout", "2s")
    run_id = serve.submit(tests=400, test_ms=10)
    wait_for(lambda: (metric(serve, 'inflight_checkpoint_pushes_total{result="failed"}') or 0) >= 2,
             30, "two failed pushes")
    wait_for(lambda: metric(serve, "inflight_checkpoint_unsaved_seconds") > 1.0, 30,
             "unsaved work older than a second")
    assert metric(serve, "inflight_records_unsaved") > 0
    assert metric(serve, "inflight_checkpoint_last_landed_timestamp_seconds") == 0
    assert metric(serve, "inflight_lease_expiry_timestamp_seconds") == 0
    status = serve.status(run_id)
    assert status["status"] == "running"
    assert status["checkpoint"]["failing_since"] and status["checkpoint"]["error"]
    assert status["interruptions"] == 0 and status["failures"] == 0
    promtool_check(serve.get("/metrics").body)


def test_start_up_says_where_checkpoints_go_without_credentials(serve_factory, tmp_path):
    url = f"http://alice:s3cret@127.0.0.1:{free_port()}/results.git"
    serve = start(serve_factory, tmp_path, url, "--pod-name", "pod-x", "--publish", "off",
                  "--git-timeout", "2s")
    [line] = [e for e in serve.events() if e.get("msg") == "checkpoints go to the results repo"]
    assert line["results_repo"].startswith("http://alice@127.0.0.1:"), line
    assert line["publish"] == "off" and line["pod"] == "pod-x"
    assert line["runs_dir"] == str(tmp_path / ".inflight" / "runs")
    assert not any("s3cret" in text for text in serve.lines)
    assert not any("local path" in e.get("msg", "") for e in serve.events())


def test_a_results_repo_on_a_local_path_is_warned_of_and_an_error_in_kubernetes(
        serve_factory, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain = serve_factory(workdir=tmp_path / "a")
    plain.wait_ready()
    [warning] = [e for e in plain.events() if "local path" in e.get("msg", "")]
    assert warning["level"] == "warn"
    assert warning["results_repo"] == str(tmp_path / "a" / ".inflight" / "results.git")
    pod = serve_factory(workdir=tmp_path / "b", env={"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    pod.wait_ready()
    [error] = [e for e in pod.events() if "local path" in e.get("msg", "")]
    assert error["level"] == "error" and "Kubernetes" in error["msg"]
