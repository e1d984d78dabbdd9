"""deploy/k8s: the Kubernetes sketch for a run over 16 question batches is consistent with
itself and with the compose deployment (parsed only: no cluster here)."""

from __future__ import annotations

from pathlib import Path

import yaml

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"


def _docs(name: str) -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all((K8S / name).read_text())}


def test_one_memgraph_pod_per_batch_named_as_the_batch_uri_says(compose):
    docs = _docs("memgraph.yaml")
    sts, service = docs["StatefulSet"], docs["Service"]
    assert service["spec"]["clusterIP"] == "None" and sts["spec"]["serviceName"] == "memgraph"
    assert sts["spec"]["replicas"] == 16 and sts["spec"]["ordinals"]["start"] == 1
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert container["image"] == compose["services"]["memgraph"]["image"]
    values = yaml.safe_load((K8S / "dagster-values.yaml").read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    env = {e["name"]: e["value"] for e in deployment["env"]}
    # batch N -> pod memgraph-N of the headless service, N = 1..replicas
    host = env["EVAL_GRAPH_BATCH_URI"].split("//")[1].split(":")[0]
    assert host == "memgraph-{batch}.memgraph"
    assert env["EVAL_DAGSTER_WEBSERVER"].startswith("http://")
    assert docs["PersistentVolumeClaim"]["spec"]["accessModes"] == ["ReadWriteMany"]


def test_runs_are_pods_admitted_one_per_graph_instance():
    values = yaml.safe_load((K8S / "dagster-values.yaml").read_text())
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    run = values["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]
    assert run["containerConfig"]["volumeMounts"][0]["mountPath"] == "/var/lib/eval_pipeline"
    queued = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    (limit,) = queued["tagConcurrencyLimits"]
    assert limit == {
        "key": "eval_pipeline/graph_instance",
        "value": {"applyLimitPerUniqueValue": True},
        "limit": 1,
    }
    assert queued["maxConcurrentRuns"] >= 17  # 16 batches and the driver
