"""A Job's podFailurePolicy, as the Job controller applies it to a failed
pod: the first rule that matches decides; none matching counts the failure
against backoffLimit. Used to judge `inflight run`'s exit codes against the
example Job's own rules (deploy/kubernetes/example/job.yaml)."""


def action_for(policy, container, exit_code, conditions=()):
    """FailJob, Ignore, Count or FailIndex for a pod whose `container`
    exited with `exit_code` (not 0) and that carries `conditions`."""
    for rule in policy["rules"]:
        on_codes = rule.get("onExitCodes")
        if on_codes and on_codes.get("containerName", container) == container:
            listed = exit_code in on_codes["values"]
            if listed == (on_codes["operator"] == "In"):
                return rule["action"]
        for condition in rule.get("onPodConditions", []):
            if condition["type"] in conditions and condition.get("status", "True") == "True":
                return rule["action"]
    return "Count"
