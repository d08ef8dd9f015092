"""The GitHub Actions workflow of docs/run.md works as written: its YAML
parses, its build step configures inflight as the docs' build does, and its
`Evals` step's script runs with that step's environment, twice, as a
cancelled job and its re-run would: the first is stopped part-way by SIGINT
(the runner's cancel) and must exit 75 with its checkpoint landed, the second
resumes it and must exit 0. What stands in for GitHub: the ${{ }} expressions
get fixed values, the results repo is a local bare repo, the token is
dropped, `.inflight-build/bin` is the bin dir given and `./run-evals.sh` is
the demo child. A workflow users copy cannot silently stop working.

    python3 tests/docs/check_actions_step.py REPO_ROOT BIN_DIR
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

DEADLINE_S = 60
EXPRESSIONS = {"github.run_number": "7", "github.run_id": "1234"}


def workflow(page):
    """The first ```yaml block of the page that declares jobs."""
    for block in re.findall(r"^```yaml\n(.*?)^```", page, re.S | re.M):
        parsed = yaml.safe_load(block)
        if isinstance(parsed, dict) and "jobs" in parsed:
            return parsed
    raise SystemExit("no GitHub Actions workflow (a ```yaml block with jobs) in docs/run.md")


def substitute(text, results_repo):
    def value(match):
        name = match.group(1).strip()
        if name in EXPRESSIONS:
            return EXPRESSIONS[name]
        if name.startswith("secrets."):
            return ""
        raise SystemExit(f"docs/run.md: no stand-in for the expression ${{{{ {name} }}}}")
    text = re.sub(r"\$\{\{(.*?)\}\}", value, text)
    return text.replace("https://github.com/your-org/eval-results.git", results_repo)


def run_step(step, bin_dir, work, demo, stop_after=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")}
    results = str(work / "results.git")
    env.update({k: substitute(str(v), results) for k, v in step.get("env", {}).items()
                if v != "${{ secrets.EVAL_RESULTS_TOKEN }}"})
    script = substitute(step["run"], results).replace(".inflight-build/bin", str(bin_dir))
    script = script.replace("./run-evals.sh", f"{demo} --tests 20 --test-ms 100")
    proc = subprocess.Popen(["bash", "-euc", "exec " + script.strip()], cwd=work, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    if stop_after is not None:
        index = work / ".inflight" / "runs" / f"evals-{EXPRESSIONS['github.run_number']}" / "index.jsonl"
        deadline = time.monotonic() + DEADLINE_S
        while not (index.exists() and index.read_text().count("\n") >= stop_after):
            if proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=DEADLINE_S)
    return proc.returncode, out


def main():
    root, bin_dir = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    flow = workflow((root / "docs" / "run.md").read_text(encoding="utf-8"))
    steps = next(iter(flow["jobs"].values()))["steps"]
    build = next(s for s in steps if s.get("name") == "Build inflight")
    if "-DINFLIGHT_TESTS=OFF" not in build["run"] or "scripts/setup" not in build["run"]:
        print("docs/run.md: the build step no longer installs the packages and builds without tests")
        return 1
    evals = next(s for s in steps if s.get("name") == "Evals")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run(["git", "init", "-q", "--bare", str(work / "results.git")], check=True)
        demo = bin_dir / "inflight-demo-eval"
        code, out = run_step(evals, bin_dir, work, demo, stop_after=3)
        if code != 75:
            print(f"the cancelled Evals step exited {code}, not 75:\n{out}")
            return 1
        code, out = run_step(evals, bin_dir, work, demo)
        if code != 0:
            print(f"the re-run Evals step exited {code}, not 0:\n{out}")
            return 1
    print("the GitHub Actions workflow's Evals step exits 75 when cancelled and 0 when re-run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
