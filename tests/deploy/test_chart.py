"""The Helm chart as rendered by the real Helm (`make chart` installs it): what it promises.

`make chart` lints, renders and validates every value set; these tests pin the
properties the chart README promises (rolling one pod at a time, PDBs of one,
gRPC probes, the advertised address, the TOML config) and show that the checks
catch what they should: a bad value refused with a message, a schema error, a
broken wiring.
"""

from __future__ import annotations

import copy
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.support.chart import CHART, HELM, NAMESPACE, ValueSet, load, manifests_of, render_text
from tests.support.chart import check_chart as checks
from tests.support.kube_local import LocalCluster

Manifest = dict[str, Any]


def _one(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    found = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def _container(workload: Manifest) -> Manifest:
    container: Manifest = workload["spec"]["template"]["spec"]["containers"][0]
    return container


def test_helm_is_the_pinned_one() -> None:
    assert HELM.exists(), f"{HELM} is missing: run `make chart`"


def test_defaults_roll_one_pod_at_a_time_with_budgets_of_one() -> None:
    manifests = load()
    for component in ("bookie", "broker", "zookeeper"):
        workload = _one(manifests, "StatefulSet", f"folio-{component}")
        assert workload["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
        budget = _one(manifests, "PodDisruptionBudget", f"folio-{component}")
        assert budget["spec"]["maxUnavailable"] == 1
        assert budget["spec"]["selector"]["matchLabels"] == workload["spec"]["selector"][
            "matchLabels"]


def test_brokers_advertise_their_pod_name_on_the_headless_service() -> None:
    manifests = load()
    broker = _one(manifests, "StatefulSet", "folio-broker")
    assert broker["spec"]["serviceName"] == "folio-broker-headless"
    container = _container(broker)
    assert ("--advertised-address=$(POD_NAME).folio-broker-headless.$(POD_NAMESPACE)"
            ".svc.cluster.local:7070") in container["args"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    headless = _one(manifests, "Service", "folio-broker-headless")
    assert headless["spec"]["clusterIP"] == "None"
    client = _one(manifests, "Service", "folio")
    assert client["spec"]["ports"] == [
        {"name": "grpc", "port": 7070, "targetPort": "grpc", "appProtocol": "grpc"}]


def test_folio_servers_have_grpc_probes_resources_and_scrape_annotations() -> None:
    manifests = load()
    for name, port, metrics in (("folio-broker", 7070, "7071"), ("folio-bookie", 3181, "8000")):
        workload = _one(manifests, "StatefulSet", name)
        container = _container(workload)
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"] == {"port": port}, (name, probe)
        assert container["resources"]["requests"]["cpu"]
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == metrics


def test_bookies_keep_data_on_a_claim_each_and_spread_over_nodes() -> None:
    bookie = _one(load(), "StatefulSet", "folio-bookie")
    claims = bookie["spec"]["volumeClaimTemplates"]
    assert [c["metadata"]["name"] for c in claims] == ["data"]
    assert {"name": "data", "mountPath": "/data"} in _container(bookie)["volumeMounts"]
    assert "--data-dir=/data" in _container(bookie)["args"]
    affinity = bookie["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" in affinity


def test_config_map_is_the_toml_of_the_values() -> None:
    """Whole numbers stay integers, strings are escaped, both tables are there."""
    text = render_text(ValueSet("default", None), extra=[
        "--set-json", 'broker.config.max_held_bytes=268435456',
        "--set-json", 'bookie.config.data_note="quote \\" back \\\\ slash"',
        "--set-json", 'broker.config.stop_grace_s=12.5'])
    config_map = _one(checks.load_manifests(text), "ConfigMap", "folio-config")
    config = tomllib.loads(config_map["data"]["folio.toml"])
    assert config["broker"]["max_held_bytes"] == 268435456
    assert config["broker"]["stop_grace_s"] == 12.5
    assert config["broker"]["ensemble_size"] == 2
    assert config["bookie"]["data_note"] == 'quote " back \\ slash'
    assert config["bookie"]["durability"] == "sync"


def test_every_folio_process_reads_the_config_map() -> None:
    manifests = load()
    for name in ("folio-broker", "folio-bookie"):
        workload = _one(manifests, "StatefulSet", name)
        assert "--config=/etc/folio/config/folio.toml" in _container(workload)["args"]
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
        assert volumes["config"]["configMap"]["name"] == "folio-config"


def test_init_job_runs_cluster_init_with_the_layout() -> None:
    job = _one(load(), "Job", "folio-init-1")
    args = _container(job)["args"]
    assert args[:2] == ["cluster", "init"]
    assert {"--container-count=16", "--ensemble-size=2", "--write-quorum=2",
            "--ack-quorum=2"} <= set(args)
    assert job["spec"]["backoffLimit"] >= 1


def test_external_zookeeper_replaces_the_charts_own() -> None:
    manifests = manifests_of(ValueSet("external", CHART / "ci" /
                                      "external-zookeeper-values.yaml"))
    assert not [m for m in manifests if "zookeeper" in m["metadata"]["name"]]
    url = ("--metadata-url=zk://zk-0.zookeeper.infra.svc.cluster.local:2181,"
           "zk-1.zookeeper.infra.svc.cluster.local:2181,"
           "zk-2.zookeeper.infra.svc.cluster.local:2181/folio/prod")
    for name in ("folio-broker", "folio-bookie"):
        assert url in _container(_one(manifests, "StatefulSet", name))["args"]


def test_secure_values_mount_the_secrets_and_probe_over_tcp() -> None:
    manifests = manifests_of(ValueSet("secure", CHART / "ci" / "secure-values.yaml"))
    broker = _one(manifests, "StatefulSet", "folio-broker")
    container = _container(broker)
    # Brokers: TLS for clients (no client certificates asked), the bookies found in
    # ZooKeeper reached with the Secret's CA and certificate and the brokers' token.
    assert {"--tls-cert=/etc/folio/tls/tls.crt", "--tls-key=/etc/folio/tls/tls.key",
            "--bookie-tls-ca=/etc/folio/tls/ca.crt", "--bookie-tls-cert=/etc/folio/tls/tls.crt",
            "--bookie-tls-key=/etc/folio/tls/tls.key",
            "--auth-token-public-key-file=/etc/folio/auth/public.pem",
            "--super-users=admin,ops,broker",
            "--bookie-token-file=/etc/folio/broker-token/token",
            # The other brokers: the same CA and token (transactions across brokers).
            "--peer-tls-ca=/etc/folio/tls/ca.crt",
            "--peer-token-file=/etc/folio/broker-token/token"} <= set(container["args"])
    assert "--tls-ca=/etc/folio/tls/ca.crt" not in container["args"]
    # The Kafka listener: SASL_SSL (tokens allow no other) on the same certificates.
    assert {"--kafka-port=9092", "--kafka-security-protocol=SASL_SSL"} <= set(container["args"])
    volumes = {v["name"]: v for v in broker["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "folio-tls"
    assert volumes["auth-token"]["secret"]["secretName"] == "folio-token-key"
    assert volumes["broker-token"]["secret"]["secretName"] == "folio-broker-token"
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {
        "/etc/folio/tls", "/etc/folio/auth", "/etc/folio/broker-token"}
    assert container["readinessProbe"]["tcpSocket"] == {"port": 7070}
    # Bookies: client certificates required, only the brokers' role; their auto-recovery
    # worker reaches the other bookies with the brokers' token.
    bookie = _one(manifests, "StatefulSet", "folio-bookie")
    args = _container(bookie)["args"]
    assert {"--tls-cert=/etc/folio/tls/tls.crt", "--tls-key=/etc/folio/tls/tls.key",
            "--tls-ca=/etc/folio/tls/ca.crt",
            "--auth-token-public-key-file=/etc/folio/auth/public.pem",
            "--super-users=broker",
            "--auto-recovery-token-file=/etc/folio/broker-token/token"} <= set(args)
    assert not [arg for arg in args if arg.startswith("--bookie-")]
    bookie_volumes = {v["name"]: v for v in bookie["spec"]["template"]["spec"]["volumes"]}
    assert bookie_volumes["broker-token"]["secret"]["secretName"] == "folio-broker-token"
    # The init Job talks to ZooKeeper only: no security flags.
    init = [m for m in manifests if m["kind"] == "Job"]
    assert init and not [arg for arg in _container(init[0])["args"] if "/etc/folio/" in arg]


@pytest.mark.parametrize(("values", "message"), [
    (["--set", "broker.config.ensemble_size=4"],
     "broker.config.ensemble_size (4) is more than bookie.replicas (3)"),
    (["--set", "broker.config.ack_quorum=3"],
     "need ensemble_size (2) >= write_quorum (2) >= ack_quorum (3)"),
    (["--set", "zookeeper.enabled=false"], "set zookeeper.external.servers"),
    (["--set", "security.tls.enabled=true"], "set security.tls.secretName"),
    (["--set", "security.authToken.enabled=true", "--set", "security.authToken.secretName=k"],
     "set security.authToken.brokerTokenSecretName"),
    (["--set", "bookie.podAntiAffinity=sometimes"],
     'bookie.podAntiAffinity must be one of the following: "soft", "hard", "none"'),
    (["--set", "bookie.replica=3"], "bookie: Additional property replica is not allowed"),
    (["--set-json", 'broker.config={"stop_grace_s": [1]}'], "broker.config.stop_grace_s"),
    (["--set", "metadataChroot=folio"], 'metadataChroot "folio" must start with /'),
    (["--set-json", 'broker.config={"Bad-Key": 1}'], 'Property name of "Bad-Key" does not match'),
])
def test_bad_values_are_refused_with_a_message(values: list[str], message: str) -> None:
    with pytest.raises(RuntimeError, match="helm template") as raised:
        render_text(ValueSet("bad", None), extra=values)
    assert message in str(raised.value)


def test_schema_validation_catches_an_unknown_field() -> None:
    text = render_text(ValueSet("bad", None), extra=[
        "--set-json", 'broker.extraEnv=[{"name": "X", "valu": "typo"}]'])
    problems = checks.validate_schemas(checks.load_manifests(text))
    assert len(problems) == 1
    assert problems[0].startswith("StatefulSet/folio-broker: spec.template.spec.containers.0.env")


def test_wiring_check_catches_a_wrong_service_name_and_port() -> None:
    manifests = copy.deepcopy(load())
    broker = _one(manifests, "StatefulSet", "folio-broker")
    broker["spec"]["serviceName"] = "folio-brokers"
    _container(broker)["readinessProbe"]["grpc"]["port"] = 7072
    problems = checks.check_wiring(manifests)
    assert ("StatefulSet/folio-broker: serviceName folio-brokers is no rendered headless "
            "Service") in problems
    assert ("StatefulSet/folio-broker container broker: readinessProbe port 7072 is not a "
            "container port") in problems



def test_zookeeper_server_ids_follow_the_pod_ordinals(tmp_path: Path) -> None:
    """The ZooKeeper container's shell line, as the kubelet expands it, up to the image's
    entry point (replaced by an echo: the official image is not here)."""
    cluster = LocalCluster(load(), tmp_path, namespace=NAMESPACE)
    try:
        for ordinal in range(3):
            pod = f"folio-zookeeper-{ordinal}"
            (command,) = cluster.commands(pod)
            assert command.argv[:2] == ["bash", "-c"]
            entry = "exec /docker-entrypoint.sh zkServer.sh start-foreground"
            assert command.argv[2].endswith(entry)
            script = command.argv[2].replace(entry, 'echo "$ZOO_MY_ID"')
            result = subprocess.run(["bash", "-c", script], env={**command.env, "HOSTNAME": pod},
                                    capture_output=True, text=True, timeout=30, check=False)
            assert result.returncode == 0, result.stderr
            assert result.stdout.strip() == str(ordinal + 1)
            data = dict(command.mounts)["/data"]
            assert (data / "data").is_dir() and (data / "log").is_dir()
            rendered = {e["name"]: e.get("value") for e in cluster.pods[pod].containers[0]["env"]}
            servers = rendered["ZOO_SERVERS"].split()
            assert servers[ordinal].startswith(
                f"server.{ordinal + 1}={pod}.folio-zookeeper-headless.{NAMESPACE}.svc")
    finally:
        cluster.close()
