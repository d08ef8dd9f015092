"""The container image, end to end, as a rollout in Kubernetes would use it.

Why it exists: the image (Containerfile) is a product of its own: its runtime
libraries, its user, its volume, `inflight serve` as PID 1 and the exit code
a runtime sees after `podman stop` are tested nowhere else. CI (.ci/run) runs
it before scripts/test.

What it does: builds the base image (scripts/build-base-image) and the image
with podman and runc; serves a bare results repo with `git daemon` on
127.0.0.1; runs pod A (host network, config from the environment, /data on an
empty host directory), submits several runs of the default demo child and
`podman stop`s it part-way (SIGTERM, SIGKILL after 30 s); checks that A exited
0 and that every run's `inflight/<pod>/<run-id>` branch landed; runs pod B on
another empty directory and checks that it resumes every run to the end with
every test recorded exactly once, deletes the branches, reaps an orphan as
PID 1, leaves no zombie, and exits 0 when stopped too. Then plays
deploy/kubernetes with `podman kube play`, runs the agentv example's image,
and runs a shard of the example Job (deploy/kubernetes/example/job.yaml) in
it twice, agentv's model calls going through the journal to a fake provider
on 127.0.0.1 with the key from a podman secret: stopped with calls in
flight, then finished by the next pod, each call paid once. Every wait has a
deadline; containers, the test's image tag and the git daemon are removed on
exit (the base image and the build cache are kept, so reruns are fast).

The image's build stage compiles with warnings as errors here. With
`--install-to DIR`, the tree it installed (/usr/local) is copied to DIR once
the image is built: CI's Release build, whose installed demo .ci/run runs.

Needs root, podman with runc, mmdebstrap, git and Debian's mirror
(scripts/setup installs the packages). Run, as root:
    tests/support/python tests/container/container_test.py [--install-to DIR]
(which puts the test support package, tests/support/inflight_testing, on the path).
"""

import argparse
import collections
import contextlib
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from inflight_testing.git_servers import INFLIGHT_PREFIX, branches, free_port, git, start_git_daemon
from inflight_testing.http import http, metric
from inflight_testing.model_provider import ModelProvider
from inflight_testing.pod_failure_policy import action_for
from inflight_testing.procfs import descendants_of
from inflight_testing.run_dirs import index_ids, run_params
from inflight_testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]

BASE = os.environ.get("INFLIGHT_BASE_IMAGE", "localhost/inflight-debian-base:bookworm")
# One tag per invocation, so that two runs on one machine never remove each other's image.
IMAGE = f"localhost/inflight-container-test:{os.getpid()}"
AGENTV_IMAGE = f"localhost/inflight-container-test-agentv:{os.getpid()}"
PODMAN = ["podman", "--runtime", "runc"]  # crun refuses this VM's hybrid cgroup layout
UID = 10001  # the image's user
RUNS = [f"ct-{n}" for n in range(1, 6)]  # one more than serve's default --max-concurrent 4
TESTS, TEST_MS = 60, 200
TOKEN = secrets.token_hex(16)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Failed(Exception):
    pass


def step(text):
    print(f"== container test: {text}", flush=True)


def run(argv, timeout, check=True, **kw):
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise Failed(f"{' '.join(map(str, argv))} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc


def podman(*args, timeout=120, check=True):
    return run(PODMAN + list(args), timeout, check)


def ulimits():
    """Explicit nofile and nproc limits, never above the host's hard limits:
    podman's default nofile fails with "operation not permitted" where the
    host's hard limit is lower, and so did nproc at a VM's whole limit (96365);
    20000 and 4096 are plenty for serve and its children."""
    def capped(limit, want):
        hard = resource.getrlimit(limit)[1]
        return want if hard == resource.RLIM_INFINITY else min(want, hard)
    nofile = capped(resource.RLIMIT_NOFILE, 20000)
    nproc = capped(resource.RLIMIT_NPROC, 4096)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


class Pod:
    """One container of the image (or `image`): a pod of the rollout."""

    def __init__(self, stack, work, name, results_repo, image=IMAGE):
        self.name = name
        self.container = f"inflight-container-test-{os.getpid()}-{name}"
        self.data = work / name  # the pod's volume, empty at start
        self.data.mkdir()
        os.chown(self.data, UID, UID)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        stack.callback(lambda: podman("rm", "--force", "--time", "0", self.container,
                                      timeout=60, check=False))
        podman("run", "--detach", "--name", self.container, "--network", "host", *ulimits(),
               "--volume", f"{self.data}:/data",
               "--env", f"INFLIGHT_RESULTS_REPO={results_repo}",
               "--env", f"INFLIGHT_POD_NAME={name}",
               "--env", f"INFLIGHT_API_TOKEN={TOKEN}",
               "--env", f"INFLIGHT_LISTEN=127.0.0.1:{self.port}",
               image)

    def running(self):
        return podman("inspect", "--format", "{{.State.Running}}", self.container).stdout.strip() == "true"

    def logs(self):
        proc = podman("logs", self.container, timeout=60, check=False)
        return proc.stdout + proc.stderr

    def wait(self, condition, timeout, what):
        """wait_for that fails at once, with the pod's log, when the container is gone."""
        def alive_and(condition=condition):
            if not self.running():
                raise Failed(f"{self.name} exited while waiting for {what}")
            return condition()
        return wait_for(alive_and, timeout, f"{what} on {self.name}")

    def get(self, path, auth=True):
        return http("GET", self.url + path, headers=AUTH if auth else None, timeout=5)

    def reachable(self, path):
        try:
            return self.get(path)
        except OSError:  # not listening yet
            return None

    def status(self, run_id):
        return self.get(f"/api/eval/status/{run_id}").json()

    def exec(self, *argv, check=True):
        return podman("exec", self.container, *argv, timeout=60, check=check)

    def zombies(self):
        # grep exits 1 when no process is in state Z.
        proc = self.exec("sh", "-c", 'grep -l "^State:.*Z" /proc/[0-9]*/status', check=False)
        return proc.stdout.split()

    def stop(self):
        """podman stop as a kubelet would: SIGTERM, SIGKILL after 30 s. Returns
        the exit code and the seconds it took."""
        started = time.monotonic()
        podman("stop", "--time", "30", self.container, timeout=90)
        took = time.monotonic() - started
        code = int(podman("inspect", "--format", "{{.State.ExitCode}}", self.container).stdout)
        return code, took

    def records(self, run_id):
        index = self.data / "runs" / run_id / "index.jsonl"
        return index.read_text().count("\n") if index.exists() else 0


def check_image(pod):
    """The process model the image promises: serve as PID 1, as the image's user."""
    comm = pod.exec("cat", "/proc/1/comm").stdout.strip()
    if comm != "inflight":
        raise Failed(f"PID 1 in {pod.name} is {comm!r}, not inflight")
    uid = pod.exec("id", "-u").stdout.strip()
    if uid != str(UID):
        raise Failed(f"{pod.name} runs as uid {uid}, not {UID}")
    if pod.get("/healthz", auth=False).status != 200:
        raise Failed("/healthz without a token is not 200: a probe could not use it")
    if pod.get("/api/eval/runs", auth=False).status != 401:
        raise Failed("/api/eval/runs without the token is not 401")


def check_orphan_reaped(pod):
    """A process whose parent exits inside the container is reparented to PID 1,
    serve, which must reap it. `podman exec` makes one: its sh exits at once and
    leaves the sleep behind."""
    before = metric(pod, "inflight_orphans_reaped_total") or 0
    pid = pod.exec("sh", "-c", "sleep 0.5 >/dev/null 2>&1 & echo $!").stdout.strip()
    pod.wait(lambda: pod.exec("test", "-e", f"/proc/{pid}", check=False).returncode != 0,
             30, f"the orphan {pid} reaped")
    pod.wait(lambda: (metric(pod, "inflight_orphans_reaped_total") or 0) > before, 10,
             "inflight_orphans_reaped_total to count the orphan")


def main(install_to):
    if os.geteuid() != 0:
        raise Failed("run as root: podman with runc, host networking and the volume's owner need it")
    if not all(shutil.which(p) for p in ("podman", "runc", "mmdebstrap", "git")):
        run([ROOT / "scripts" / "setup"], 900)
    timings = {}
    with contextlib.ExitStack() as stack:
        work = Path(tempfile.mkdtemp(prefix="inflight-container-test."))
        print(f"work directory: {work}", flush=True)

        step(f"base image {BASE}")
        started = time.monotonic()
        subprocess.run(["nice", "-n", "10", ROOT / "scripts" / "build-base-image"], check=True,
                       env={**os.environ, "INFLIGHT_BASE_IMAGE": BASE}, stdin=subprocess.DEVNULL,
                       timeout=900)
        timings["base image"] = time.monotonic() - started

        step(f"image {IMAGE}")
        started = time.monotonic()
        stack.callback(lambda: podman("rmi", "--force", IMAGE, timeout=120, check=False))
        build = run(["nice", "-n", "10", *PODMAN, "build", "--network", "host", "--layers",
                     "--build-arg", f"BASE={BASE}",
                     "--build-arg", "INFLIGHT_CMAKE_ARGS=-DINFLIGHT_WERROR=ON", "--tag", IMAGE,
                     "--file", ROOT / "Containerfile", ROOT], 1800, check=False)
        if build.returncode != 0:
            raise Failed(f"podman build exited {build.returncode}:\n{build.stdout[-6000:]}{build.stderr[-6000:]}")
        timings["image build"] = time.monotonic() - started
        if install_to:
            copy_install(install_to)

        started = time.monotonic()
        # On every address: the pod of `podman kube play` is on podman's
        # bridge, not the host's network, and reaches it as host.containers.internal.
        daemon = stack.enter_context(start_git_daemon(work / "git", listen="0.0.0.0"))
        print(f"results repo: {daemon.url}", flush=True)
        pods = []
        try:
            test(stack, work, daemon, pods)
            kube_play(stack, work, daemon)
            agentv_image(stack, work, daemon, pods)
            job_shard(stack, work, daemon)
        except BaseException:
            for pod in pods:
                print(f"--- log of {pod.name} ({pod.container})", file=sys.stderr)
                print(pod.logs()[-8000:], file=sys.stderr)
            print(f"--- git daemon log\n{daemon.log.read_text()[-3000:]}", file=sys.stderr)
            print(f"work directory kept: {work}", file=sys.stderr)
            raise
        timings["test"] = time.monotonic() - started
    shutil.rmtree(work)
    print("container test passed: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))


def copy_install(target):
    """The image's /usr/local, as its build stage installed it, into `target`."""
    container = podman("create", IMAGE).stdout.strip()
    try:
        Path(target).mkdir(parents=True, exist_ok=True)
        podman("cp", f"{container}:/usr/local/.", str(target))
    finally:
        podman("rm", "--force", container, check=False)
    print(f"the image's /usr/local copied to {target}", flush=True)


def test(stack, work, daemon, pods):
    step("pod A: runs, then podman stop part-way")
    a = Pod(stack, work, "ct-pod-a", daemon.url)
    pods.append(a)
    a.wait(lambda: (r := a.reachable("/readyz")) and r.status == 200, 120, "/readyz 200")
    check_image(a)
    for run_id in RUNS:
        response = http("POST", a.url + "/api/eval/run", headers=AUTH,
                        body={"id": run_id, "tests": TESTS, "test_ms": TEST_MS})
        if response.status != 202:
            raise Failed(f"submit of {run_id}: {response.status} {response.body}")
    # Four run at once (serve's default), the fifth waits in the queue.
    a.wait(lambda: sum(a.records(r) >= 3 for r in RUNS) >= 4, 120, "3 records in four runs")
    code, took = a.stop()
    progress = {r: a.records(r) for r in RUNS}
    print(f"pod A exited {code} in {took:.1f}s after podman stop; records: {progress}", flush=True)
    if code != 0:
        raise Failed(f"pod A exited {code} after podman stop (1: a checkpoint did not land)")
    if sum(0 < n < TESTS for n in progress.values()) < 4:
        raise Failed(f"fewer than four runs were interrupted part-way: {progress}")

    expected = {f"{INFLIGHT_PREFIX}{a.name}/{r}" for r in RUNS}
    landed = branches(daemon.bare)
    if set(landed) != expected:
        raise Failed(f"branches after pod A's stop: {sorted(landed)}, expected {sorted(expected)}")
    for ref, tip in sorted(landed.items()):
        subject = git(daemon.bare, "log", "-1", "--format=%s", tip).strip()
        if not subject.endswith("(shutdown)"):
            raise Failed(f"{ref}: the tip is {subject!r}, not a shutdown checkpoint")
    leases = git(daemon.bare, "for-each-ref", "--format=%(refname)", "refs/heads/inflight-lease/")
    if leases.strip():
        raise Failed(f"pod A's lease is still there after a clean shutdown: {leases}")
    print(f"branches landed: {len(landed)}, each tip a shutdown checkpoint", flush=True)

    step("pod B on an empty volume: resumes every run")
    b = Pod(stack, work, "ct-pod-b", daemon.url)
    pods.append(b)
    b.wait(lambda: (r := b.reachable("/readyz")) and r.status == 200, 120, "/readyz 200")
    check_image(b)
    check_orphan_reaped(b)
    b.wait(lambda: all(b.status(r)["status"] == "succeeded" for r in RUNS), 300, "every run succeeded")
    wait_for(lambda: not branches(daemon.bare), 60, "the deletion of every run's branch")
    for run_id in RUNS:
        ids = index_ids(b.data / "runs" / run_id)
        if sorted(ids) != [f"t{n:03d}" for n in range(1, TESTS + 1)]:
            raise Failed(f"{run_id}: the tests recorded are not each test exactly once: {ids}")
        attempts = run_params(b.data / "runs" / run_id)["attempts"]
        last = attempts[-1]
        if last["pod"] != b.name or last["outcome"] != "succeeded":
            raise Failed(f"{run_id}: the last attempt is {last}")
        # A run that had started has one attempt on each pod; the one that was
        # queued at the shutdown starts fresh on pod B, as attempt 1.
        pods_of_attempts = [x["pod"] for x in attempts]
        if pods_of_attempts != ([a.name, b.name] if progress[run_id] else [b.name]):
            raise Failed(f"{run_id}: attempts {attempts}, after {progress[run_id]} records on pod A")
    print(f"every run resumed and finished on pod B, each of its {TESTS} tests recorded once", flush=True)
    if not (b.data / "cache.git").is_dir():
        raise Failed("no checkpoint cache beside the runs dir on the volume (/data/cache.git)")
    zombies = b.zombies()
    if zombies:
        raise Failed(f"zombies in pod B: {zombies}")
    code, took = b.stop()
    print(f"pod B exited {code} in {took:.1f}s after podman stop", flush=True)
    if code != 0:
        raise Failed(f"pod B exited {code} after podman stop")


def deployment_for_podman(work, daemon, name, port):
    """deploy/kubernetes's Deployment and ConfigMap as the test plays them:
    this image, this results repo, the API port published on the host, one
    replica, and the Secret named after the test (podman keeps secrets of its
    own, made from a Secret's YAML by the test)."""
    with open(ROOT / "deploy" / "kubernetes" / "deployment.yaml") as f:
        deployment = yaml.safe_load(f)
    with open(ROOT / "deploy" / "kubernetes" / "configmap.yaml") as f:
        configmap = yaml.safe_load(f)
    deployment["metadata"]["name"] = name
    spec = deployment["spec"]["template"]["spec"]
    deployment["spec"]["replicas"] = 1
    [container] = spec["containers"]
    container["image"] = IMAGE
    [http_port] = container["ports"]
    http_port["hostPort"] = port
    for variable in container["env"]:
        if variable["name"] == "INFLIGHT_RESULTS_REPO":
            variable["value"] = f"git://host.containers.internal:{daemon.port}/{daemon.bare.name}"
        secret = variable.get("valueFrom", {}).get("secretKeyRef")
        if secret:
            secret["name"] = name
    for volume in spec["volumes"]:
        if "secret" in volume:
            volume["secret"]["secretName"] = name
    path = work / "kube.yaml"
    path.write_text(yaml.safe_dump_all([configmap, deployment]))
    return path, spec["terminationGracePeriodSeconds"]


def podman_secret(stack, work, name):
    """The Secret the Deployment reads, as a podman secret. podman 4.3 writes
    a key's `data` value to the file as it is (it does not decode base64)."""
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
              "type": "Opaque",
              "data": {"api-token": TOKEN, "git-username": "inflight", "git-token": "unused"}}
    path = work / "secret.yaml"
    path.write_text(yaml.safe_dump(secret))
    stack.callback(lambda: podman("secret", "rm", name, check=False))
    podman("secret", "create", name, path)


def kube_play(stack, work, daemon):
    step("deploy/kubernetes by podman kube play: starts, /readyz through its port, SIGTERM pushes")
    name = f"inflight-ct{os.getpid()}"
    port = free_port()
    podman_secret(stack, work, name)
    manifest, grace = deployment_for_podman(work, daemon, name, port)
    # podman's default nofile and nproc exceed this VM's hard limits (ulimits()).
    conf = work / "containers.conf"
    conf.write_text('[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]\n')
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    stack.callback(lambda: run(PODMAN + ["kube", "down", manifest], 120, check=False, env=env))
    run(PODMAN + ["kube", "play", manifest], 300, env=env)
    pod = name + "-pod-0"  # the pod podman makes of the Deployment: INFLIGHT_POD_NAME
    url = f"http://127.0.0.1:{port}"
    def ready():
        try:
            return http("GET", url + "/readyz", timeout=5).status == 200
        except OSError:
            return False
    wait_for(ready, 120, f"/readyz 200 through the published port {port}")
    runs = [f"kp-{n}" for n in (1, 2)]
    for run_id in runs:
        response = http("POST", url + "/api/eval/run", headers=AUTH,
                        body={"id": run_id, "tests": TESTS, "test_ms": TEST_MS})
        if response.status != 202:
            raise Failed(f"submit of {run_id} to the played pod: {response.status} {response.body}")
    def started():
        statuses = [http("GET", f"{url}/api/eval/status/{r}", headers=AUTH).json() for r in runs]
        return all(s["progress"]["records"] >= 3 for s in statuses)
    wait_for(started, 120, "3 records in each run of the played pod")
    # As the kubelet stops a pod: SIGTERM, SIGKILL after the Deployment's
    # terminationGracePeriodSeconds. `podman kube down` alone (4.3) stops
    # with a timeout of 0, SIGKILL at once, which no pod survives.
    run(PODMAN + ["pod", "stop", "--time", str(grace), pod], grace + 30, env=env)
    code = podman("inspect", "--format", "{{.State.ExitCode}}", f"{pod}-inflight").stdout.strip()
    if code != "0":
        raise Failed(f"the played pod exited {code} after SIGTERM (1: a checkpoint did not land)")
    run(PODMAN + ["kube", "down", manifest], 120, env=env)
    expected = {f"{INFLIGHT_PREFIX}{pod}/{r}" for r in runs}
    landed = {ref: tip for ref, tip in branches(daemon.bare).items() if ref in expected}
    if set(landed) != expected:
        raise Failed(f"after podman kube down: branches {sorted(branches(daemon.bare))}, "
                     f"expected {sorted(expected)}")
    for ref, tip in landed.items():
        subject = git(daemon.bare, "log", "-1", "--format=%s", tip).strip()
        if not subject.endswith("(shutdown)"):
            raise Failed(f"{ref}: the tip is {subject!r}, not a shutdown checkpoint")
    print(f"podman kube down pushed {len(landed)} runs of {pod}", flush=True)


def agentv_image(stack, work, daemon, pods):
    """examples/agentv/Containerfile: inflight, Node.js from Debian and the
    pinned agentv, built on this image; the example's eval runs to the end in it."""
    step(f"the agentv example image {AGENTV_IMAGE}")
    stack.callback(lambda: podman("rmi", "--force", AGENTV_IMAGE, timeout=120, check=False))
    # npm trusts what this host trusts (a proxy's CA included).
    host_ca = "/etc/ssl/certs/ca-certificates.crt"
    build = run(["nice", "-n", "10", *PODMAN, "build", "--network", "host", "--layers",
                 "--volume", f"{host_ca}:/run/host-ca.crt:ro",
                 "--build-arg", "NODE_EXTRA_CA_CERTS=/run/host-ca.crt",
                 "--build-arg", f"BASE={BASE}", "--build-arg", f"INFLIGHT_IMAGE={IMAGE}",
                 "--tag", AGENTV_IMAGE, "--file", ROOT / "examples" / "agentv" / "Containerfile",
                 ROOT], 1800, check=False)
    if build.returncode != 0:
        raise Failed(f"podman build of the agentv image exited {build.returncode}:\n"
                     f"{build.stdout[-6000:]}{build.stderr[-6000:]}")
    pod = Pod(stack, work, "ct-agentv", daemon.url, image=AGENTV_IMAGE)
    pods.append(pod)
    pod.wait(lambda: (r := pod.reachable("/readyz")) and r.status == 200, 120, "/readyz 200")
    response = http("POST", pod.url + "/api/eval/run", headers=AUTH,
                    body={"id": "ct-agentv-run", "child": "agentv"})
    if response.status != 202:
        raise Failed(f"submit of the agentv run: {response.status} {response.body}")
    pod.wait(lambda: pod.status("ct-agentv-run")["status"] in ("succeeded", "failed"), 300,
             "the agentv run to end")
    status = pod.status("ct-agentv-run")
    tests = {json.loads(line)["test_id"] for line in
             (pod.data / "runs" / "ct-agentv-run" / "index.jsonl").read_text().splitlines()}
    if status["status"] != "succeeded" or len(tests) != 16:
        raise Failed(f"the agentv run: {status}, {len(tests)} of 16 tests recorded")
    code, _ = pod.stop()
    if code != 0:
        raise Failed(f"the agentv pod exited {code} after podman stop")
    print("agentv ran the example's 16 tests in its image", flush=True)


def job_container(stack, work, daemon, index, pod_name, secret, config):
    """The example Job's pod for `index` as `podman run` can make it (podman
    4.3 has no Job kind): the agentv image, its command, args and env as the
    manifest gives them, JOB_COMPLETION_INDEX set as the Job controller sets
    it, the model's key from a podman secret as the Secret's secretKeyRef,
    this results repo, and the example's config pointed at the test's
    provider in place of the image's. Returns (container name, its volume,
    the Job)."""
    with open(ROOT / "deploy" / "kubernetes" / "example" / "job.yaml") as f:
        job = yaml.safe_load(f)
    [spec] = job["spec"]["template"]["spec"]["containers"]
    args = [a.replace("$(JOB_COMPLETION_INDEX)", str(index)) for a in spec["args"]]
    env = {e["name"]: e["value"] for e in spec["env"] if "value" in e}
    env.pop("INFLIGHT_GIT_TOKEN_FILE")  # git:// needs none
    env.update({"INFLIGHT_RESULTS_REPO": daemon.url, "INFLIGHT_POD_NAME": pod_name,
                "JOB_COMPLETION_INDEX": str(index)})
    [key_ref] = [e["valueFrom"]["secretKeyRef"] for e in spec["env"]
                 if e["name"] == "OPENAI_API_KEY"]
    if key_ref["key"] != "openai-api-key":
        raise Failed(f"the Job's OPENAI_API_KEY comes from {key_ref}, not the Secret's openai-api-key")
    name = f"inflight-container-test-{os.getpid()}-{pod_name}"
    data = work / pod_name
    data.mkdir()
    os.chown(data, UID, UID)
    stack.callback(lambda: podman("rm", "--force", "--time", "0", name, timeout=60, check=False))
    env_flags = [flag for k, v in env.items() for flag in ("--env", f"{k}={v}")]
    # The manifest's volumes (emptyDirs) and read-only root file system.
    podman("run", "--detach", "--name", name, "--network", "host", *ulimits(), "--read-only",
           "--volume", f"{data}:/data", "--tmpfs", "/tmp", "--tmpfs", "/home/inflight",
           "--volume", f"{config}:{args[args.index('--config') + 1]}:ro",
           "--secret", f"{secret},type=env,target=OPENAI_API_KEY", "--workdir", spec["workingDir"],
           *env_flags, "--entrypoint", json.dumps(spec["command"]), AGENTV_IMAGE, *args)
    return name, data, job


def environs(container):
    """The environment of the container's PID 1 and of each of its
    descendants, read from the host (a `podman exec`'d process gets the
    container's configured environment, the secret included: it is no
    descendant)."""
    pid = int(podman("inspect", "--format", "{{.State.Pid}}", container).stdout)
    seen = b""
    for p in [pid, *descendants_of(pid)]:
        with contextlib.suppress(OSError):
            seen += Path(f"/proc/{p}/environ").read_bytes() + b"\n"
    return seen.decode(errors="replace")


def job_shard(stack, work, daemon):
    """A shard of the example Job, agentv's model calls through the journal
    to a fake provider: its pod stopped with calls in flight, then the pod
    the Job makes in its place; each exit code judged by the Job's own
    podFailurePolicy; each call paid once, with a key no process but
    inflight held."""
    step("a shard of the example Job (deploy/kubernetes/example/job.yaml), twice, through the journal")
    run_id, key = "suite-1", f"sk-test-{secrets.token_hex(20)}"
    secret = f"inflight-ct{os.getpid()}-openai"
    (work / "openai-api-key").write_text(key)
    stack.callback(lambda: podman("secret", "rm", secret, check=False))
    podman("secret", "create", secret, work / "openai-api-key")
    provider = stack.enter_context(ModelProvider(api_key=key, delay=1.0))
    config = json.loads((ROOT / "examples" / "agentv" / "inflight-journal.json").read_text())
    config["models"]["openai"]["upstream"] = provider.url
    (work / "journal-config.json").write_text(json.dumps(config))
    os.chmod(work / "journal-config.json", 0o644)

    first, data, job = job_container(stack, work, daemon, 1, "inflight-evals-1-first", secret,
                                     work / "journal-config.json")
    index = data / "runs" / run_id / "index.jsonl"
    wait_for(lambda: index.exists() and len(index.read_text().splitlines()) >= 2 and
             provider.in_flight(), 120, "2 tests answered and calls in flight in the first pod")
    seen = environs(first)
    if key in seen:
        raise Failed("a process of the first pod holds the key in its environment")
    if "OPENAI_API_KEY=" not in seen:
        raise Failed("no process of the first pod got a token as OPENAI_API_KEY")
    podman("stop", "--time", str(job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]),
           first, timeout=120)
    policy = job["spec"]["podFailurePolicy"]
    code = int(podman("inspect", "--format", "{{.State.ExitCode}}", first).stdout)
    if code != 75 or action_for(policy, "eval", code) != "Ignore":
        raise Failed(f"the stopped shard exited {code} ({action_for(policy, 'eval', code)}), "
                     "not 75 (Ignore)")
    paid_before = provider.paid()
    second, _, _ = job_container(stack, work, daemon, 1, "inflight-evals-1-second", secret,
                                 work / "journal-config.json")
    wait_for(lambda: podman("inspect", "--format", "{{.State.Running}}", second).stdout.strip()
             == "false", 300, "the second pod of the shard to end")
    code = int(podman("inspect", "--format", "{{.State.ExitCode}}", second).stdout)
    logs = podman("logs", second, check=False)
    if code != 0:
        raise Failed(f"the second pod of the shard exited {code}:\n{logs.stdout[-4000:]}{logs.stderr[-4000:]}")
    records = git(daemon.bare, "show", f"refs/inflight-results/{run_id}:index.jsonl")
    ids = sorted(json.loads(line)["test_id"] for line in records.splitlines())
    if ids != [f"sum-{n}" for n in range(10, 17)]:
        raise Failed(f"{run_id}: the published records are not each of sum-1* exactly once: {ids}")
    prompts = collections.Counter(e["prompt"] for e in provider.ledger())
    if len(prompts) != 7 or set(prompts.values()) != {1}:
        raise Failed(f"{run_id}: calls paid {dict(prompts)}: each of 7 once expected")
    if any(ref.endswith("/" + run_id) for ref in branches(daemon.bare)):
        raise Failed(f"{run_id}: its branch is still there after it was published")
    published = run(["git", "-C", daemon.bare, "grep", "-c", "-F", key,
                     f"refs/inflight-results/{run_id}"], 60, check=False).stdout
    if key in logs.stdout + logs.stderr or published.strip():
        raise Failed("the key is in the second pod's log or in the published result")
    print(f"the shard exited 75 (Ignore) with {paid_before} calls paid, then 0 on its next pod: "
          "7 records once, 7 calls paid once", flush=True)


def on_signal(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")  # runs the cleanups of the ExitStack


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, on_signal)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install-to", metavar="DIR",
                        help="copy the image's installed /usr/local to DIR")
    try:
        main(parser.parse_args().install_to)
    except Failed as e:
        print(f"container test: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
