"""deploy/kubernetes: the manifests are valid Kubernetes objects (checked
offline against the OpenAPI schemas, and the example ServiceMonitor against
the Prometheus Operator's CRD schema, by tests/deploy/validate.cjs), their
shutdown budget adds up, their wiring (probes, ports, Secret, downward API,
writable volumes, security context, disruption budget, spreading, network
policy, scraping) is what docs/kubernetes.md promises, and the real `inflight serve`
accepts the settings the Deployment gives it.

The validator's npm packages are installed with `npm ci` from the committed
lock file into a cache outside the repo, keyed by the lock file's hash, so a
second run installs nothing."""

import copy
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from inflight_testing.http import http
from inflight_testing.waiting import wait_for
from conftest import BIN_DIR, INFLIGHT

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "deploy" / "kubernetes"
VALIDATOR_DIR = REPO / "tests" / "deploy"
VALIDATOR = VALIDATOR_DIR / "validate.cjs"

# What must be left between the end of --grace-period (plus any preStop) and
# terminationGracePeriodSeconds, when the kubelet SIGKILLs the container: serve's
# exit after its last git step is cut off at the deadline, and the kubelet and
# container runtime delivering SIGTERM and seeing the exit. Seconds, not
# milliseconds, since the kubelet counts whole seconds and its SIGTERM is not
# instant.
MARGIN_SECONDS = 5

EXPECTED_OBJECTS = {"Deployment/inflight", "Service/inflight", "ConfigMap/inflight-config",
                    "Secret/inflight", "PodDisruptionBudget/inflight", "NetworkPolicy/inflight",
                    "ServiceMonitor/inflight", "Job/inflight-evals"}


def manifest_files():
    return sorted(p for p in MANIFESTS.rglob("*") if p.suffix in (".yaml", ".yml"))


@pytest.fixture(scope="module")
def node_modules():
    """The validator's packages, installed once per lock file."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (scripts/setup installs Node.js and npm)")
    digest = hashlib.sha256((VALIDATOR_DIR / "package-lock.json").read_bytes()).hexdigest()[:16]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inflight-tests"
    target = base / f"deploy-{digest}"
    complete = target / "node_modules" / ".inflight-complete"
    if not complete.exists():
        base.mkdir(parents=True, exist_ok=True)
        if target.exists():  # left by an install that did not finish
            shutil.rmtree(target, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix=f"deploy-{digest}.", dir=base))
        try:
            for name in ("package.json", "package-lock.json"):
                shutil.copy(VALIDATOR_DIR / name, work / name)
            r = subprocess.run(
                ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=work, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, f"npm ci failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
            (work / "node_modules" / ".inflight-complete").write_text(digest + "\n")
            try:
                work.rename(target)  # atomic: a concurrent run sees all or nothing
            except OSError:
                if not complete.exists():
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    assert (target / "node_modules" / "kubernetes-models").is_dir()
    assert (target / "node_modules" / "@kubernetes-models" / "prometheus-operator").is_dir()
    return target / "node_modules"


def run_validator(node_modules, *args):
    env = dict(os.environ, NODE_PATH=str(node_modules))
    return subprocess.run(["node", str(VALIDATOR), *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def objects(node_modules):
    """Every document of deploy/kubernetes, parsed by the same YAML parser as
    the validator, keyed by "Kind/name"."""
    r = run_validator(node_modules, "--dump", *manifest_files())
    assert r.returncode == 0, r.stderr
    found = {}
    for entry in json.loads(r.stdout):
        for doc in entry["documents"]:
            key = f"{doc['kind']}/{doc['metadata']['name']}"
            assert key not in found, f"{key} defined twice"
            found[key] = dict(doc, _file=entry["file"])
    return found


def pod_spec(objects):
    return objects["Deployment/inflight"]["spec"]["template"]["spec"]


def serve_container(spec):
    containers = [c for c in spec["containers"] if c["name"] == "inflight"]
    assert len(containers) == 1, "the Deployment has no container named inflight"
    return containers[0]


def env_values(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def env_entry(container, name):
    entries = [e for e in container.get("env", []) if e["name"] == name]
    assert len(entries) == 1, f"{name}: set {len(entries)} times in the serve container"
    return entries[0]


def seconds(duration):
    """inflight's durations: 250ms, 30s, 5m, 2h, 7d."""
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d)", duration)
    assert m, f"not an inflight duration: {duration!r}"
    return int(m[1]) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[m[2]]


def prestop_seconds(container):
    """How long the preStop hook may hold SIGTERM back; 0 without one."""
    hook = container.get("lifecycle", {}).get("preStop")
    if not hook:
        return 0
    if "sleep" in hook:
        return hook["sleep"]["seconds"]
    command = hook.get("exec", {}).get("command", [])
    if len(command) == 2 and Path(command[0]).name == "sleep" and command[1].isdigit():
        return int(command[1])
    pytest.fail(f"cannot bound the duration of the preStop hook {hook}")


def shutdown_budget(deployment):
    """The numbers of the grace budget; raises AssertionError when they do not add up."""
    spec = deployment["spec"]["template"]["spec"]
    container = serve_container(spec)
    env = env_values(container)
    budget = {
        "termination_grace": spec.get("terminationGracePeriodSeconds", 30),
        "grace": seconds(env.get("INFLIGHT_GRACE_PERIOD") or "30s"),
        "flush": seconds(env.get("INFLIGHT_FLUSH_WINDOW") or "2s"),
        "prestop": prestop_seconds(container),
    }
    # serve refuses a flush window that does not leave max(1 s, 5 %) of the grace period.
    push_margin = max(1, budget["grace"] * 0.05)
    assert budget["flush"] < budget["grace"] - push_margin, \
        f"the flush window {budget['flush']}s leaves no time to push within the grace period {budget['grace']}s"
    assert budget["grace"] + budget["prestop"] + MARGIN_SECONDS <= budget["termination_grace"], (
        f"grace period {budget['grace']}s + preStop {budget['prestop']}s + margin {MARGIN_SECONDS}s "
        f"exceeds terminationGracePeriodSeconds {budget['termination_grace']}")
    return budget


# --- schema validation -------------------------------------------------------


def test_every_manifest_is_a_valid_kubernetes_object(node_modules):
    files = manifest_files()
    r = run_validator(node_modules, *files)
    assert r.returncode == 0, r.stderr
    valid = {line.split()[-1] for line in r.stdout.splitlines() if line.startswith("ok ")}
    assert valid == EXPECTED_OBJECTS, r.stdout
    assert {Path(line.split()[1]) for line in r.stdout.splitlines()} == set(files)


def test_a_valid_copy_stays_valid(node_modules, objects, tmp_path):
    """The control for the broken copies below: copying as JSON changes nothing."""
    copy_path = tmp_path / "deployment.yaml"
    copy_path.write_text(json.dumps(strip(objects["Deployment/inflight"])))
    r = run_validator(node_modules, copy_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"ok {copy_path} Deployment/inflight"


def strip(doc):
    return {k: v for k, v in doc.items() if k != "_file"}


def container_of(doc):
    return doc["spec"]["template"]["spec"]["containers"][0]


BROKEN = {
    "probe port is an object": (
        lambda d: container_of(d)["readinessProbe"]["httpGet"].update(port={"number": 3117}),
        "readinessProbe/httpGet/port must"),
    "unknown field (a typo)": (
        lambda d: d["spec"]["template"]["spec"].update(terminationGracePeriodSecond=60),
        "unknown field spec.template.spec.terminationGracePeriodSecond"),
    "unknown field in the security context": (
        lambda d: container_of(d)["securityContext"].update(readOnlyRootFS=True),
        "unknown field spec.template.spec.containers.0.securityContext.readOnlyRootFS"),
    "replicas is a string": (
        lambda d: d["spec"].update(replicas="2"), "spec/replicas must be integer"),
    "env entry without a name": (
        lambda d: container_of(d)["env"][0].pop("name"), "must have required property name"),
    "misspelt kind": (
        lambda d: d.update(kind="Deploymnet"), 'unknown apiVersion/kind "apps/v1"/"Deploymnet"'),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_copy_is_rejected(node_modules, objects, tmp_path, case):
    break_it, message = BROKEN[case]
    doc = copy.deepcopy(strip(objects["Deployment/inflight"]))
    break_it(doc)
    broken = tmp_path / "deployment.yaml"
    broken.write_text(json.dumps(doc))
    r = run_validator(node_modules, broken)
    assert r.returncode == 1, r.stdout + r.stderr
    kind = "Deploymnet" if case == "misspelt kind" else "Deployment"
    assert f"{broken}: {kind}/inflight: " in r.stderr, r.stderr
    assert message in r.stderr, r.stderr


BROKEN_OTHER_KINDS = {
    "ServiceMonitor port is a number": (
        "ServiceMonitor/inflight", lambda d: d["spec"]["endpoints"][0].update(port=3117),
        "endpoints/0/port must be string"),
    "ServiceMonitor credentials without a key": (
        "ServiceMonitor/inflight",
        lambda d: d["spec"]["endpoints"][0]["authorization"]["credentials"].pop("key"),
        "must have required property key"),
    "ServiceMonitor unknown field (a typo)": (
        "ServiceMonitor/inflight", lambda d: d["spec"]["endpoints"][0].update(bearerTokenSecrets={}),
        "unknown field spec.endpoints.0.bearerTokenSecrets"),
    "PodDisruptionBudget unknown field": (
        "PodDisruptionBudget/inflight", lambda d: d["spec"].update(maxUnavailible=1),
        "unknown field spec.maxUnavailible"),
    "NetworkPolicy port is an object": (
        "NetworkPolicy/inflight", lambda d: d["spec"]["ingress"][0]["ports"][0].update(port={"name": "http"}),
        "ports/0/port must"),
}


@pytest.mark.parametrize("case", BROKEN_OTHER_KINDS)
def test_a_broken_copy_of_another_kind_is_rejected(node_modules, objects, tmp_path, case):
    """The schemas of the other kinds, the Prometheus Operator's CRD among
    them, are checked too, unknown fields included."""
    key, break_it, message = BROKEN_OTHER_KINDS[case]
    doc = copy.deepcopy(strip(objects[key]))
    valid = tmp_path / "valid.yaml"
    valid.write_text(json.dumps(doc))
    r = run_validator(node_modules, valid)
    assert r.returncode == 0, r.stderr
    break_it(doc)
    broken = tmp_path / "broken.yaml"
    broken.write_text(json.dumps(doc))
    r = run_validator(node_modules, broken)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{broken}: {key}: " in r.stderr and message in r.stderr, r.stderr


def test_broken_yaml_text_is_rejected(node_modules, tmp_path):
    original = (MANIFESTS / "deployment.yaml").read_text()
    cases = {
        "wrong type": ("terminationGracePeriodSeconds: 60", "terminationGracePeriodSeconds: sixty",
                       "terminationGracePeriodSeconds must be integer"),
        "duplicate key": ("  replicas: 2\n", "  replicas: 2\n  replicas: 3\n", "not valid YAML"),
    }
    for name, (old, new, message) in cases.items():
        assert original.count(old) == 1, f"{name}: {old!r} is not in deployment.yaml once"
        broken = tmp_path / f"{name.replace(' ', '-')}.yaml"
        broken.write_text(original.replace(old, new))
        r = run_validator(node_modules, broken)
        assert r.returncode == 1 and f"{broken}: " in r.stderr and message in r.stderr, \
            f"{name}: {r.stdout}{r.stderr}"


# --- the shutdown budget ----------------------------------------------------


def test_the_shutdown_budget_adds_up(objects):
    budget = shutdown_budget(objects["Deployment/inflight"])
    # The numbers docs/kubernetes.md "The shutdown budget" and the Deployment's comment quote.
    assert budget == {"termination_grace": 60, "grace": 45, "flush": 10, "prestop": 0}


@pytest.mark.parametrize("change, message", [
    ({"INFLIGHT_GRACE_PERIOD": "56s"}, "exceeds terminationGracePeriodSeconds"),
    ({"INFLIGHT_FLUSH_WINDOW": "45s"}, "leaves no time to push"),
    ({"INFLIGHT_FLUSH_WINDOW": "43s"}, "leaves no time to push"),
    ({"preStop": 11}, "exceeds terminationGracePeriodSeconds"),
])
def test_the_budget_check_refuses_a_budget_that_does_not_add_up(objects, change, message):
    deployment = copy.deepcopy(objects["Deployment/inflight"])
    container = serve_container(deployment["spec"]["template"]["spec"])
    for name, value in change.items():
        if name == "preStop":
            container["lifecycle"] = {"preStop": {"sleep": {"seconds": value}}}
        else:
            env_entry(container, name)["value"] = value
    with pytest.raises(AssertionError, match=message):
        shutdown_budget(deployment)


# --- wiring ----------------------------------------------------------------


def test_probes_ports_and_service_agree(objects):
    spec = pod_spec(objects)
    container = serve_container(spec)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    listen = env_values(container)["INFLIGHT_LISTEN"]
    host, port = listen.rsplit(":", 1)
    assert host == "0.0.0.0" and ports["http"] == int(port)
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path and get["port"] in ("http", int(port)), (probe, get)
        assert "httpHeaders" not in get  # both routes answer without the API token
    service = objects["Service/inflight"]["spec"]
    assert service["selector"].items() <= spec_labels(objects).items()
    assert [p["targetPort"] for p in service["ports"]] == ["http"]


def spec_labels(objects):
    return objects["Deployment/inflight"]["spec"]["template"]["metadata"]["labels"]


def test_secrets_and_pod_name_come_from_the_cluster(objects):
    spec = pod_spec(objects)
    container = serve_container(spec)
    pod_name = env_entry(container, "INFLIGHT_POD_NAME")["valueFrom"]["fieldRef"]
    assert pod_name["fieldPath"] == "metadata.name"
    secret = objects["Secret/inflight"]
    assert secret["_file"].endswith("example/secret.yaml"), "the example Secret must stay out of deploy/kubernetes/*.yaml"
    keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
    username = env_entry(container, "INFLIGHT_GIT_USERNAME")
    assert "value" not in username
    assert username["valueFrom"]["secretKeyRef"] == {"name": "inflight", "key": "git-username",
                                                     "optional": True}
    # The tokens are files of the Secret's volume, never variables (docs/security.md "Secrets and children").
    names = {e["name"] for e in container["env"]}
    assert not names & {"INFLIGHT_API_TOKEN", "INFLIGHT_GIT_TOKEN"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for name, key in (("INFLIGHT_API_TOKEN_FILE", "api-token"),
                      ("INFLIGHT_GIT_TOKEN_FILE", "git-token")):
        path = env_entry(container, name)["value"]
        mount = [m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
        assert len(mount) == 1 and mount[0].get("readOnly") is True, (name, mount)
        source = volumes[mount[0]["name"]]["secret"]
        assert source["secretName"] == "inflight" and not source.get("optional"), source
        assert source["defaultMode"] in (0o400, 0o440), source
        items = {item["path"]: item["key"] for item in source["items"]}
        assert items[path[len(mount[0]["mountPath"]) + 1:]] == key and key in keys, (name, items)
    # Not the owner of the files (root is), the pod's user reads them through
    # fsGroup: group read is needed.
    assert spec["securityContext"]["fsGroup"] == 10001
    assert volumes["inflight-secrets"]["secret"]["defaultMode"] == 0o440
    assert all("REPLACE-ME" in secret["stringData"][k] for k in ("api-token", "git-token"))


def test_every_writable_path_is_a_volume(objects):
    spec = pod_spec(objects)
    container = serve_container(spec)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]
              if not m.get("readOnly")}
    assert all("emptyDir" in v for v in mounts.values())

    def on_writable_volume(path):
        return any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts)

    env = env_values(container)
    runs_dir = env["INFLIGHT_RUNS_DIR"]
    # cache.git is created beside the runs dir, so the parent must be writable too.
    assert on_writable_volume(str(Path(runs_dir).parent)), runs_dir
    assert on_writable_volume(env["HOME"]) and on_writable_volume(container["workingDir"])
    assert "/tmp" in mounts
    # The config file comes from the ConfigMap.
    config_mount = [m for m in container["volumeMounts"]
                    if env["INFLIGHT_CONFIG"].startswith(m["mountPath"] + "/")]
    assert len(config_mount) == 1 and config_mount[0].get("readOnly")
    config_volume = volumes[config_mount[0]["name"]]["configMap"]
    config_map = objects[f"ConfigMap/{config_volume['name']}"]
    key = env["INFLIGHT_CONFIG"][len(config_mount[0]["mountPath"]) + 1:]
    assert "child" in json.loads(config_map["data"][key])


def test_the_security_context_is_restrictive(objects):
    spec = pod_spec(objects)
    pod = spec["securityContext"]
    container = serve_container(spec)["securityContext"]
    assert pod["runAsNonRoot"] is True and container["runAsNonRoot"] is True
    assert pod["runAsUser"] == 10001 and pod["runAsGroup"] == 10001
    assert (container.get("seccompProfile") or pod["seccompProfile"])["type"] == "RuntimeDefault"
    assert container["allowPrivilegeEscalation"] is False
    assert container["capabilities"]["drop"] == ["ALL"] and not container["capabilities"].get("add")
    assert spec["automountServiceAccountToken"] is False
    resources = serve_container(spec)["resources"]
    assert {"cpu", "memory"} <= resources["requests"].keys() <= resources["limits"].keys()


# --- disruptions, spreading, network policy, scraping --------------------------


def selects(selector, labels):
    """Whether a Kubernetes label selector (matchLabels, matchExpressions)
    selects an object with `labels`. An empty selector selects everything,
    as Kubernetes reads it."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        key, op, values = e["key"], e["operator"], e.get("values", [])
        ok = {"In": key in labels and labels[key] in values,
              "NotIn": labels.get(key) not in values,
              "Exists": key in labels,
              "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True


def test_selects_is_a_label_selector():
    """The control for the selector checks below: they can say no."""
    labels = {"app.kubernetes.io/name": "inflight", "app.kubernetes.io/component": "supervisor"}
    assert selects({"matchLabels": {"app.kubernetes.io/name": "inflight"}}, labels)
    assert not selects({"matchLabels": {"app.kubernetes.io/name": "other"}}, labels)
    assert not selects({"matchLabels": {"app.kubernetes.io/name": "inflight", "tier": "x"}}, labels)
    assert selects({"matchExpressions": [{"key": "app.kubernetes.io/name", "operator": "In",
                                          "values": ["inflight"]}]}, labels)
    assert not selects({"matchExpressions": [{"key": "app.kubernetes.io/name",
                                              "operator": "DoesNotExist"}]}, labels)
    assert selects({}, labels)


def container_port(container, port):
    """A port of a NetworkPolicy or a Service (a number, or a container port's
    name) as the container's port number; None when the container has no
    such port."""
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    if isinstance(port, str):
        return ports.get(port)
    return port if port in ports.values() else None


def test_the_disruption_budget_lets_one_pod_go_at_a_time(objects):
    deployment = objects["Deployment/inflight"]
    pdb = objects["PodDisruptionBudget/inflight"]["spec"]
    assert pdb["selector"], "an empty selector would hold every pod of the namespace"
    assert selects(pdb["selector"], spec_labels(objects))
    # The budget's selector is the Deployment's own: it covers all of its
    # pods, and no pod that the Deployment does not own.
    assert pdb["selector"] == deployment["spec"]["selector"]
    assert pdb.get("maxUnavailable") == 1 and "minAvailable" not in pdb
    # With one replica, maxUnavailable 1 would let a drain stop the only pod
    # and leave no live pod to take its runs.
    assert deployment["spec"]["replicas"] >= 2


def test_the_pods_spread_over_nodes(objects):
    spec = pod_spec(objects)
    by_node = [c for c in spec.get("topologySpreadConstraints", [])
               if c["topologyKey"] == "kubernetes.io/hostname"]
    assert len(by_node) == 1, spec.get("topologySpreadConstraints")
    constraint = by_node[0]
    assert selects(constraint["labelSelector"], spec_labels(objects))
    assert constraint["labelSelector"] == objects["Deployment/inflight"]["spec"]["selector"]
    assert constraint["maxSkew"] == 1
    # A preference: see the comment in deployment.yaml on draining one of two nodes.
    assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"


def admits(policy, port, pod_labels, namespace_labels, same_namespace):
    """Whether a NetworkPolicy's ingress rules let a pod with `pod_labels`,
    in a namespace with `namespace_labels`, reach `port` (a number) of the
    pods the policy selects."""
    container = serve_container(policy["_pod_spec"])
    for rule in policy["spec"].get("ingress", []):
        ports = rule.get("ports")
        if ports and not any(container_port(container, p.get("port")) == port
                             and p.get("protocol", "TCP") == "TCP" for p in ports):
            continue
        peers = rule.get("from")
        if not peers:
            return True
        for peer in peers:
            if "ipBlock" in peer:
                continue
            if "namespaceSelector" in peer:
                in_namespace = selects(peer["namespaceSelector"], namespace_labels)
            else:
                in_namespace = same_namespace
            if in_namespace and selects(peer.get("podSelector", {}), pod_labels):
                return True
    return False


def test_the_network_policy_lets_only_clients_and_prometheus_reach_the_api(objects):
    policy = dict(objects["NetworkPolicy/inflight"], _pod_spec=pod_spec(objects))
    spec = policy["spec"]
    assert spec["podSelector"], "an empty podSelector would isolate every pod of the namespace"
    assert selects(spec["podSelector"], spec_labels(objects))
    # Ingress only: egress stays open for the results repo outside the
    # cluster and the eval children's own calls (see networkpolicy.yaml).
    assert spec["policyTypes"] == ["Ingress"] and "egress" not in spec
    api_port = container_port(serve_container(pod_spec(objects)), "http")
    assert api_port == 3117
    # Every port the policy opens is the API's.
    for rule in spec["ingress"]:
        assert rule.get("ports"), "a rule without ports opens every port"
        assert {container_port(serve_container(pod_spec(objects)), p["port"])
                for p in rule["ports"]} == {api_port}

    this_namespace = {"kubernetes.io/metadata.name": "evals"}
    monitoring = {"kubernetes.io/metadata.name": "monitoring"}
    client = {"inflight-api-client": "true"}
    prometheus = {"app.kubernetes.io/name": "prometheus"}
    assert admits(policy, api_port, client, this_namespace, True)
    assert admits(policy, api_port, prometheus, monitoring, False)
    # The refused: unlabelled pods, clients of other namespaces, a pod named
    # prometheus outside the monitoring namespace, anything on another port.
    assert not admits(policy, api_port, {"app": "web"}, this_namespace, True)
    assert not admits(policy, api_port, client, {"kubernetes.io/metadata.name": "other"}, False)
    assert not admits(policy, api_port, prometheus, this_namespace, True)
    assert not admits(policy, api_port, {"app": "x"}, monitoring, False)
    assert not admits(policy, 22, client, this_namespace, True)


def test_the_scrape_annotations_name_the_metrics_port(objects):
    template = objects["Deployment/inflight"]["spec"]["template"]
    annotations = template["metadata"].get("annotations", {})
    assert annotations.get("prometheus.io/scrape") == "true"
    assert annotations.get("prometheus.io/path") == "/metrics"
    container = serve_container(template["spec"])
    # Annotations are strings; the port is the API's container port.
    assert annotations.get("prometheus.io/port") == str(container_port(container, "http"))


def test_the_service_monitor_scrapes_the_service_with_the_api_token(objects):
    monitor = objects["ServiceMonitor/inflight"]
    assert monitor["_file"].endswith("example/servicemonitor.yaml"), \
        "the ServiceMonitor needs the Operator's CRDs: it must stay out of deploy/kubernetes/*.yaml"
    service = objects["Service/inflight"]
    assert selects(monitor["spec"]["selector"], service["metadata"]["labels"])
    assert "namespaceSelector" not in monitor["spec"]  # the Service is in the monitor's namespace
    service_ports = {p["name"]: p for p in service["spec"]["ports"]}
    container = serve_container(pod_spec(objects))
    assert len(monitor["spec"]["endpoints"]) == 1
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["port"] in service_ports, (endpoint["port"], list(service_ports))
    assert container_port(container, service_ports[endpoint["port"]]["targetPort"]) == 3117
    assert endpoint["path"] == "/metrics" and endpoint.get("scheme", "http") == "http"
    # /metrics needs the API token: the Secret's key that the Deployment
    # mounts as INFLIGHT_API_TOKEN_FILE.
    credentials = endpoint["authorization"]["credentials"]
    assert endpoint["authorization"].get("type", "Bearer") == "Bearer"
    volumes = {v["name"]: v for v in pod_spec(objects)["volumes"]}
    token_file = env_entry(container, "INFLIGHT_API_TOKEN_FILE")["value"]
    mount = [m for m in container["volumeMounts"] if token_file.startswith(m["mountPath"] + "/")][0]
    source = volumes[mount["name"]]["secret"]
    items = {item["path"]: item["key"] for item in source["items"]}
    assert credentials == {"name": source["secretName"],
                           "key": items[token_file[len(mount["mountPath"]) + 1:]]}
    assert credentials["key"] in objects["Secret/inflight"]["stringData"]


def test_the_deployment_leaves_max_attempts_at_its_default(objects):
    """Interruptions (rollouts, drains) have a budget of their own,
    --max-interruptions: the attempts are not raised to make room for them."""
    container = serve_container(pod_spec(objects))
    assert "INFLIGHT_MAX_ATTEMPTS" not in {e["name"] for e in container["env"]}
    assert not any("max-attempts" in a for a in container.get("args", []) + container.get("command", []))


# --- the real binary with the manifest's settings ------------------------------


class ServeProcess:
    """`inflight serve` started with an environment only (no flags), so that
    every setting is the manifest's; stderr collected line by line."""

    def __init__(self, env, cwd):
        self.lines = []
        self.proc = subprocess.Popen([str(INFLIGHT), "serve"], cwd=cwd, env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line)

    def event(self, msg, timeout=30):
        def found():
            for line in list(self.lines):
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if event.get("msg") == msg:
                    return event
            if self.proc.poll() is not None and not self.reader.is_alive():
                raise AssertionError(f"serve exited {self.proc.returncode} before {msg!r}:\n"
                                     + "".join(self.lines))
            return None
        return wait_for(found, timeout, f"log line {msg!r}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def local_settings(objects, root):
    """The serve container's environment as the kubelet would build it, with
    each volume a directory under `root`. Only the results repo differs from
    the manifest (its host is a placeholder): a bare repo under `root`; and
    the API's port is 0, since 3117 may be taken on this machine."""
    spec = pod_spec(objects)
    container = serve_container(spec)
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {}
    secret = objects["Secret/inflight"]["stringData"]
    for m in container["volumeMounts"]:
        mounts[m["mountPath"]] = root / "volumes" / m["name"]
        mounts[m["mountPath"]].mkdir(parents=True)
        if "configMap" in volumes[m["name"]]:
            config_map = objects[f"ConfigMap/{volumes[m['name']]['configMap']['name']}"]
            for key, text in config_map["data"].items():
                (mounts[m["mountPath"]] / key).write_text(local_programs(text))
        if "secret" in volumes[m["name"]]:
            source = volumes[m["name"]]["secret"]
            for item in source["items"]:
                (mounts[m["mountPath"]] / item["path"]).write_text(secret[item["key"]])
                (mounts[m["mountPath"]] / item["path"]).chmod(source["defaultMode"])

    def rebase(path):
        mount = max((p for p in mounts if path == p or path.startswith(p + "/")), key=len, default=None)
        return str(mounts[mount] / path[len(mount):].lstrip("/")) if mount else path

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for entry in container["env"]:
        source = entry.get("valueFrom", {})
        if "value" in entry:
            value = entry["value"]
        elif "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "metadata.name"
            value = "inflight-7d9c4b-x2k8q"
        elif source["secretKeyRef"]["key"] in secret:
            value = secret[source["secretKeyRef"]["key"]]
        else:
            assert source["secretKeyRef"].get("optional"), entry
            continue
        env[entry["name"]] = rebase(value) if value.startswith("/") else value
    env["INFLIGHT_RESULTS_REPO"] = str(root / "results.git")
    env["INFLIGHT_LISTEN"] = env["INFLIGHT_LISTEN"].rsplit(":", 1)[0] + ":0"
    return env, rebase(container["workingDir"]), mounts


def local_programs(config_text):
    """The image's /usr/local/libexec/inflight/inflight-demo-eval is this
    build's $INFLIGHT_BIN_DIR/inflight-demo-eval."""
    config = json.loads(config_text)
    for template in [config.get("child")] + list(config.get("children", {}).values()):
        if template and not Path(template["argv"][0]).exists():
            local = BIN_DIR / Path(template["argv"][0]).name
            assert local.exists(), f"{template['argv'][0]}: no {local} to stand in for it"
            template["argv"][0] = str(local)
    return json.dumps(config)


@pytest.mark.runs_inflight
def test_serve_runs_with_the_manifest_settings(objects, tmp_path):
    env, cwd, mounts = local_settings(objects, tmp_path)
    serve = ServeProcess(env, cwd)
    try:
        listening = serve.event("listening")
        assert listening["pod"] == "inflight-7d9c4b-x2k8q"
        assert listening["address"].startswith("0.0.0.0:")
        url = "http://127.0.0.1:" + listening["address"].rsplit(":", 1)[1]
        api_token = Path(env["INFLIGHT_API_TOKEN_FILE"]).read_text()
        assert api_token == objects["Secret/inflight"]["stringData"]["api-token"]
        token = {"Authorization": "Bearer " + api_token}
        assert http("GET", url + "/healthz").status == 200
        wait_for(lambda: http("GET", url + "/readyz").status == 200, 30, "readyz")
        assert http("GET", url + "/api/eval/runs").status == 401
        assert http("GET", url + "/api/eval/runs", headers=token).status == 200
        # What the scrape annotations and the ServiceMonitor name: /metrics,
        # which needs the token they send.
        metrics_path = objects["Deployment/inflight"]["spec"]["template"]["metadata"]["annotations"][
            "prometheus.io/path"]
        assert http("GET", url + metrics_path).status == 401
        scraped = http("GET", url + metrics_path, headers=token)
        assert scraped.status == 200 and "inflight_checkpoint_pushes_total" in scraped.body, scraped.body

        r = http("POST", url + "/api/eval/run", {"id": "k8s-1", "tests": 3, "test_ms": 10}, headers=token)
        assert r.status == 202, r.body
        wait_for(lambda: http("GET", url + "/api/eval/status/k8s-1", headers=token).json()["status"]
                 == "succeeded", 30, "the run to succeed")
        run_dir = Path(env["INFLIGHT_RUNS_DIR"]) / "k8s-1"
        assert len((run_dir / "index.jsonl").read_text().splitlines()) == 3
        assert json.loads((run_dir / "run-params.json").read_text())["origin_pod"] == "inflight-7d9c4b-x2k8q"
        # The cache sits beside the runs dir, on the same writable volume.
        assert (Path(env["INFLIGHT_RUNS_DIR"]).parent / "cache.git").is_dir()
        assert Path(env["INFLIGHT_RUNS_DIR"]).parent == mounts["/data"]

        serve.proc.send_signal(signal.SIGTERM)
        grace = seconds(env["INFLIGHT_GRACE_PERIOD"])
        assert serve.proc.wait(timeout=grace + MARGIN_SECONDS) == 0, "".join(serve.lines)
    finally:
        serve.stop()


@pytest.mark.runs_inflight
def test_serve_refuses_the_manifest_settings_without_the_api_token(objects, tmp_path):
    """The Secret's API token is what lets serve listen on 0.0.0.0."""
    env, cwd, _ = local_settings(objects, tmp_path)
    del env["INFLIGHT_API_TOKEN_FILE"]
    r = subprocess.run([str(INFLIGHT), "serve"], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert "api-token" in r.stderr.lower() or "api_token" in r.stderr.lower(), r.stderr


# --------------------------------------------------------------------------
# The example Indexed Job of `inflight run` shards (example/job.yaml)


def job_container(objects):
    [container] = objects["Job/inflight-evals"]["spec"]["template"]["spec"]["containers"]
    return container


def test_the_job_runs_one_shard_per_index_and_gives_the_shutdown_its_budget(objects):
    job = objects["Job/inflight-evals"]["spec"]
    assert job["completionMode"] == "Indexed"
    spec = job["template"]["spec"]
    assert spec["restartPolicy"] == "Never"  # required by podFailurePolicy
    container = job_container(objects)
    assert container["command"] == ["/usr/local/bin/inflight", "run"]
    args = container["args"]
    assert args[args.index("--id") + 1] == "suite-$(JOB_COMPLETION_INDEX)"
    env = env_values(container)
    grace, flush = seconds(env["INFLIGHT_GRACE_PERIOD"]), seconds(env["INFLIGHT_FLUSH_WINDOW"])
    assert flush < grace - max(1, grace / 20)
    assert grace + MARGIN_SECONDS <= spec["terminationGracePeriodSeconds"]
    assert env_entry(container, "INFLIGHT_POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.name"


def test_the_jobs_pod_failure_policy_retries_interruptions_for_free(objects):
    from inflight_testing.pod_failure_policy import action_for
    policy = objects["Job/inflight-evals"]["spec"]["podFailurePolicy"]
    name = job_container(objects)["name"]
    assert action_for(policy, name, 75) == "Ignore"  # not finished, its state landed
    assert action_for(policy, name, 143, ["DisruptionTarget"]) == "Ignore"
    assert action_for(policy, name, 2) == "FailJob"  # usage: no retry fixes it
    assert action_for(policy, name, 1) == "Count"
    assert action_for(policy, name, 3) == "Count"


def test_the_jobs_model_key_is_inflights_alone(objects):
    """The key comes from the Secret into inflight's environment (the
    config's api_key_env); agentv gets a token of its attempt and the
    listener's URL through --env, never the key's variable."""
    container = job_container(objects)
    key_ref = env_entry(container, "OPENAI_API_KEY")["valueFrom"]["secretKeyRef"]
    assert key_ref["name"] == "inflight" and key_ref["key"] in objects["Secret/inflight"][
        "stringData"]
    args = container["args"]
    given = [args[i + 1] for i, a in enumerate(args[:args.index("--")]) if a == "--env"]
    assert "OPENAI_API_KEY={model_key}" in given
    assert "OPENAI_BASE_URL={model_url:openai}/v1" in given
    assert "--inherit-env" not in args


@pytest.mark.runs_inflight
def test_inflight_run_accepts_the_jobs_command(objects, tmp_path):
    """The Job's command as `inflight run` takes it, with the index the Job
    controller would set, a local results repo, the example's config pointed
    at the fake provider and agentv from the example's lock: shard 1's seven
    tests, each call paid once with the key, which agentv never held."""
    from example_journal import journal_config, new_key
    from inflight_testing.model_provider import ModelProvider
    from npm_tools import npm_install
    from test_example_agentv import EXAMPLE, example_copy
    agentv = npm_install(EXAMPLE, "agentv", "--omit=optional")
    container = job_container(objects)
    example = example_copy(tmp_path)
    args = [a.replace("$(JOB_COMPLETION_INDEX)", "1") for a in container["args"]]
    config = "/srv/agentv/inflight-journal.json"
    args[args.index(config)] = str(example / "inflight-journal.json")
    key = new_key()
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFLIGHT_")}
    env.update({k: v for k, v in env_values(container).items()
                if v is not None and k not in ("INFLIGHT_GIT_TOKEN_FILE", "INFLIGHT_RESULTS_REPO",
                                               "INFLIGHT_RUNS_DIR", "HOME")})
    env.update({"INFLIGHT_POD_NAME": "inflight-evals-1-abcde", "OPENAI_API_KEY": key,
                "PATH": f"{agentv}:{os.environ['PATH']}",
                "INFLIGHT_RESULTS_REPO": str(tmp_path / "results.git"),
                "INFLIGHT_RUNS_DIR": str(tmp_path / "runs")})
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "results.git")], check=True)
    assert container["command"][1:] == ["run"]
    with ModelProvider(api_key=key) as provider:
        journal_config(example, provider, "agentv")
        r = subprocess.run([str(INFLIGHT), "run", *args], cwd=example, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr[-4000:]
        assert "suite-1" in r.stderr
        prompts = [e["prompt"] for e in provider.ledger()]
        assert len(prompts) == 7 == len(set(prompts)), prompts
        assert all(e["headers"]["authorization"] == f"Bearer {key}" for e in provider.ledger())
    assert key not in r.stdout + r.stderr
