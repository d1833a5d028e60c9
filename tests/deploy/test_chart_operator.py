"""What a Kafka or Pulsar operator looks for in the chart (issue 24 item 7, issue 23 item 6).

NetworkPolicies (evaluated here as Kubernetes evaluates ingress rules: which
pod may open which port of which pod), the PrometheusRule and dashboard
ConfigMap made from the files in deploy/ (the chart's copies kept identical),
scheduling and service-account values, the reserved journal volume, and the
Kafka listener: its flags, Services, per-pod advertised names, the external
listener per broker and the combinations a broker would refuse.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.kafka_listener_specs import parse_listeners
from tests.support.chart import CHART, NAMESPACE, ValueSet, load, manifests_of, render_text
from tests.support.kube_local import LocalCluster

Manifest = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "folio-alerts.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "folio.json"
OPERATOR = ValueSet("operator", CHART / "ci" / "operator-values.yaml")


def _kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def _one(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    found = [m for m in _kind(manifests, kind) if m["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def _broker(manifests: list[Manifest]) -> Manifest:
    container: Manifest = _one(manifests, "StatefulSet", "folio-broker")["spec"]["template"][
        "spec"]["containers"][0]
    return container


# --- NetworkPolicies -----------------------------------------------------------------------

def _pods(manifests: list[Manifest]) -> dict[str, Manifest]:
    """Pod template of each component (zookeeper, bookie, broker, init), and a client pod."""
    pods = {t["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]:
            t["spec"]["template"] for t in manifests if t["kind"] in ("StatefulSet", "Job")}
    pods["client"] = {"metadata": {"labels": {"app": "some-client"}}, "spec": {"containers": []}}
    return pods


def _port_number(template: Manifest, port: int | str) -> int:
    for container in template["spec"]["containers"]:
        for spec in container.get("ports", []):
            if port in (spec["containerPort"], spec.get("name")):
                return int(spec["containerPort"])
    raise AssertionError(f"no port {port}")


def _selects(selector: Manifest, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _allowed(manifests: list[Manifest], source: str, target: str, port: int) -> bool:
    """Whether pod ``source`` may open ``port`` on pod ``target`` (same namespace)."""
    pods = _pods(manifests)
    labels = pods[target]["metadata"]["labels"]
    policies = [p for p in _kind(manifests, "NetworkPolicy")
                if _selects(p["spec"]["podSelector"], labels)]
    if not policies:
        return True
    for policy in policies:
        for rule in policy["spec"].get("ingress", []):
            ports = {_port_number(pods[target], p["port"]) for p in rule.get("ports", [])}
            if ports and port not in ports:
                continue
            peers = rule.get("from")
            if peers is None or any(
                    "podSelector" in peer and "namespaceSelector" not in peer
                    and _selects(peer["podSelector"], pods[source]["metadata"]["labels"])
                    for peer in peers):
                return True
    return False


def test_zookeeper_takes_only_brokers_bookies_and_the_init_job() -> None:
    manifests = load()
    zookeeper = _pods(manifests)["zookeeper"]
    client, quorum = _port_number(zookeeper, "client"), _port_number(zookeeper, "follower")
    for source in ("broker", "bookie", "init"):
        assert _allowed(manifests, source, "zookeeper", client), source
    for source in ("client", "zookeeper"):
        assert not _allowed(manifests, source, "zookeeper", client), source
    assert _allowed(manifests, "zookeeper", "zookeeper", quorum)
    assert not _allowed(manifests, "broker", "zookeeper", quorum)


def test_bookies_take_api_calls_only_from_brokers_and_bookies() -> None:
    manifests = load()
    bookie = _pods(manifests)["bookie"]
    api, metrics = _port_number(bookie, "grpc"), _port_number(bookie, "metrics")
    assert _allowed(manifests, "broker", "bookie", api)
    # Auto-recovery: a bookie copies entries from the others.
    assert _allowed(manifests, "bookie", "bookie", api)
    for source in ("client", "init", "zookeeper"):
        assert not _allowed(manifests, source, "bookie", api), source
    # Any Prometheus may scrape unless metricsFrom says who.
    assert _allowed(manifests, "client", "bookie", metrics)
    # Brokers are the public face: no policy.
    assert _allowed(manifests, "client", "broker", _port_number(_pods(manifests)["broker"],
                                                                "grpc"))


@pytest.mark.parametrize("value_set", [ValueSet("default", None), OPERATOR,
                                       ValueSet("secure", CHART / "ci" / "secure-values.yaml")],
                         ids=lambda v: v.name)
def test_every_connection_the_commands_make_is_allowed(value_set: ValueSet) -> None:
    """From the rendered commands: each pod given --metadata-url may reach ZooKeeper's
    client port; brokers (they write ledgers) and bookies (auto-recovery) may reach the
    bookies' API."""
    manifests = manifests_of(value_set)
    pods = _pods(manifests)
    client_port = _port_number(pods["zookeeper"], "client")
    bookie_api = _port_number(pods["bookie"], "grpc")
    for component, template in pods.items():
        if component in ("client", "zookeeper"):
            continue
        args = " ".join(template["spec"]["containers"][0].get("args", []))
        assert "--metadata-url=zk://" in args, component
        assert _allowed(manifests, component, "zookeeper", client_port), component
        if component in ("broker", "bookie"):
            assert _allowed(manifests, component, "bookie", bookie_api), component


def test_metrics_from_restricts_scrapes_and_policies_turn_off() -> None:
    restricted = manifests_of(OPERATOR)
    bookie = _one(restricted, "NetworkPolicy", "folio-bookie")
    (metrics_rule,) = [r for r in bookie["spec"]["ingress"]
                       if r["ports"] == [{"port": "metrics", "protocol": "TCP"}]]
    assert metrics_rule["from"] == [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "monitoring"}}}]
    assert not _allowed(restricted, "client", "bookie", 8000)
    off = manifests_of(ValueSet("off", None), extra=["--set", "networkPolicy.enabled=false"])
    assert _kind(off, "NetworkPolicy") == []
    external = manifests_of(ValueSet("external", CHART / "ci" / "external-zookeeper-values.yaml"))
    assert [p["metadata"]["name"] for p in _kind(external, "NetworkPolicy")] == ["folio-bookie"]


# --- PrometheusRule and dashboard ----------------------------------------------------------

def test_the_charts_copies_of_the_deploy_files_are_identical() -> None:
    """Helm reads only files inside the chart: files/ holds copies, kept equal here."""
    assert (CHART / "files" / "folio-alerts.yml").read_bytes() == ALERTS.read_bytes(), (
        "cp deploy/prometheus/folio-alerts.yml deploy/helm/folio/files/folio-alerts.yml")
    assert (CHART / "files" / "folio-dashboard.json").read_bytes() == DASHBOARD.read_bytes(), (
        "cp deploy/grafana/folio.json deploy/helm/folio/files/folio-dashboard.json")


def test_prometheus_rule_and_dashboard_come_from_deploy() -> None:
    manifests = manifests_of(OPERATOR)
    rule = _one(manifests, "PrometheusRule", "folio")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert rule["spec"]["groups"] == yaml.safe_load(ALERTS.read_text())["groups"]
    dashboard = _one(manifests, "ConfigMap", "folio-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["folio.json"]) == json.loads(DASHBOARD.read_text())
    # The ServiceMonitor names its jobs as deploy/prometheus does (the rules match them).
    monitor = _one(manifests, "ServiceMonitor", "folio")
    assert monitor["spec"]["jobLabel"] == "folio.io/job"
    jobs = {s["metadata"]["labels"].get("folio.io/job") for s in _kind(manifests, "Service")}
    assert {"folio-broker", "folio-bookie"} <= jobs
    assert _kind(load(), "PrometheusRule") == []


# --- scheduling, service account, journal --------------------------------------------------

def test_scheduling_and_service_account_values() -> None:
    manifests = manifests_of(OPERATOR)
    broker = _one(manifests, "StatefulSet", "folio-broker")["spec"]["template"]["spec"]
    assert broker["priorityClassName"] == "folio-critical"
    assert broker["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert "podAntiAffinity" in broker["affinity"]
    bookie = _one(manifests, "StatefulSet", "folio-bookie")["spec"]["template"]["spec"]
    # `affinity` replaces the anti-affinity preset.
    assert list(bookie["affinity"]) == ["nodeAffinity"]
    account = _one(manifests, "ServiceAccount", "folio")
    assert account["automountServiceAccountToken"] is False
    for name in ("folio-broker", "folio-bookie"):
        spec = _one(manifests, "StatefulSet", name)["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == "folio"
        assert spec["automountServiceAccountToken"] is False
    default = _one(load(), "StatefulSet", "folio-broker")["spec"]["template"]["spec"]
    assert default["serviceAccountName"] == "default"
    assert "priorityClassName" not in default and "topologySpreadConstraints" not in default


def test_the_journal_volume_is_a_claim_of_its_own_passed_as_journal_dir() -> None:
    help_text = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "folio"), "bookie", "--help"], capture_output=True,
        text=True, timeout=60, check=False).stdout
    assert "--journal-dir" in help_text
    objects = manifests_of(ValueSet("journal", None), extra=[
        "--set", "bookie.journal.enabled=true", "--set", "bookie.journal.size=20Gi"])
    bookie = _one(objects, "StatefulSet", "folio-bookie")["spec"]
    container = bookie["template"]["spec"]["containers"][0]
    assert "--journal-dir=/journal" in container["args"]
    assert {"name": "journal", "mountPath": "/journal"} in container["volumeMounts"]
    claims = {c["metadata"]["name"]: c["spec"] for c in bookie["volumeClaimTemplates"]}
    assert claims["journal"]["resources"]["requests"]["storage"] == "20Gi"
    default = _one(load(), "StatefulSet", "folio-bookie")["spec"]
    assert [c["metadata"]["name"] for c in default["volumeClaimTemplates"]] == ["data"]
    assert not any(a.startswith("--journal-dir")
                   for a in default["template"]["spec"]["containers"][0]["args"])


# --- Kafka listener ------------------------------------------------------------------------

def test_kafka_listener_advertises_each_pod_through_the_headless_service() -> None:
    manifests = manifests_of(ValueSet("kafka", None), extra=["--set", "broker.kafka.enabled=true"])
    args = _broker(manifests)["args"]
    assert "--kafka-port=9092" in args
    assert ("--kafka-advertised-host=$(POD_NAME).folio-broker-headless.$(POD_NAMESPACE)"
            ".svc.cluster.local") in args
    assert "--kafka-advertised-port=9092" in args
    assert not [a for a in args if a.startswith(("--kafka-security", "--kafka-sasl"))]
    client = _one(manifests, "Service", "folio")
    assert {"name": "kafka", "port": 9092, "targetPort": "kafka"} in client["spec"]["ports"]
    headless = _one(manifests, "Service", "folio-broker-headless")
    assert {"name": "kafka", "port": 9092, "targetPort": "kafka"} in headless["spec"]["ports"]
    assert "--kafka-port=9092" not in _broker(load())["args"]


def test_kafka_sasl_ssl_flags() -> None:
    manifests = manifests_of(ValueSet("secure", CHART / "ci" / "secure-values.yaml"), extra=[
        "--set", "broker.kafka.enabled=true", "--set", "broker.kafka.securityProtocol=SASL_SSL",
        "--set-json", 'broker.kafka.saslMechanisms=["PLAIN","SCRAM-SHA-512"]'])
    args = _broker(manifests)["args"]
    assert "--kafka-security-protocol=SASL_SSL" in args
    assert "--kafka-sasl-mechanisms=PLAIN,SCRAM-SHA-512" in args


#: An external listener of its own beside the INTERNAL one.
_OWN = ["--set", "broker.kafka.external.enabled=true",
        "--set", "broker.kafka.external.listener=own"]


@pytest.mark.parametrize(("values", "message"), [
    (["--set", "broker.kafka.securityProtocol=SSL"],
     "securityProtocol SSL needs security.tls.enabled"),
    (["-f", str(CHART / "ci" / "secure-values.yaml"), "--set", "broker.kafka.securityProtocol=SSL"],
     "with security.authToken.enabled the Kafka listener must be SASL_SSL"),
    (["--set", "security.tls.enabled=true", "--set", "security.tls.secretName=t"],
     "set broker.kafka.allowPlaintext (--kafka-allow-plaintext)"),
    (["--set", "broker.kafka.external.enabled=true", "--set",
      "broker.kafka.external.type=LoadBalancer"], "set broker.kafka.external.domain"),
    (["--set", "broker.kafka.securityProtocol=SASL_PLAIN"],
     "broker.kafka.securityProtocol must be one of the following"),
    # The listeners: EXTERNAL beside INTERNAL (external.listener own).
    (["--set", "broker.kafka.external.enabled=true",
      "--set", "broker.kafka.external.listener=both"],
     "broker.kafka.external.listener must be one of the following"),
    (["--set-json", 'broker.kafka.external.advertised=[{"host": "a b", "port": 1}]'],
     "broker.kafka.external.advertised.0.host: Does not match pattern"),
    (["--set-json", 'broker.kafka.external.advertised=[{"host": "k0"}]'],
     "broker.kafka.external.advertised.0: port is required"),
    (["--set", "broker.kafka.external.securityProtocol=SASL_PLAINTEXT"],
     "broker.kafka.external.securityProtocol must be one of the following"),
    ([*_OWN, "--set", "broker.kafka.external.securityProtocol=SSL"],
     "broker.kafka.external.securityProtocol SSL needs security.tls.enabled"),
    (["-f", str(CHART / "ci" / "secure-values.yaml"), *_OWN,
      "--set", "broker.kafka.external.securityProtocol=PLAINTEXT"],
     "broker.kafka.external.securityProtocol PLAINTEXT: with security.authToken.enabled the "
     "Kafka listener must be SASL_SSL"),
    ([*_OWN, "--set", "broker.kafka.external.containerPort=9092"],
     "broker.kafka.external.containerPort 9092 is broker.kafka.port's"),
    ([*_OWN, "--set-json", 'broker.kafka.external.advertised=[{"host": "k0", "port": 1}]'],
     "broker.kafka.external.advertised has 1 entries for 2 brokers"),
    (["--set", "broker.kafka.external.enabled=true", "--set",
      "broker.kafka.external.securityProtocol=SSL"],
     "broker.kafka.external.securityProtocol needs a listener of its own"),
    ([*_OWN, "--set", "broker.kafka.external.type=LoadBalancer"],
     "set broker.kafka.external.domain"),
])
def test_kafka_combinations_a_broker_refuses_are_refused(values: list[str], message: str) -> None:
    with pytest.raises(RuntimeError, match="helm template") as raised:
        render_text(ValueSet("bad", None), extra=["--set", "broker.kafka.enabled=true", *values])
    assert message in str(raised.value)


def test_external_load_balancer_per_broker() -> None:
    manifests = manifests_of(ValueSet("lb", None), extra=[
        "--set", "broker.kafka.enabled=true", "--set", "broker.kafka.external.enabled=true",
        "--set", "broker.kafka.external.type=LoadBalancer",
        "--set", "broker.kafka.external.domain=kafka.example.com",
        "--set-json", 'broker.kafka.external.loadBalancerIPs=["10.0.0.7"]'])
    args = _broker(manifests)["args"]
    assert "--kafka-advertised-host=$(POD_NAME).kafka.example.com" in args
    assert "--kafka-advertised-port=9094" in args
    assert "command" not in _broker(manifests)
    for ordinal in range(2):
        service = _one(manifests, "Service", f"folio-broker-{ordinal}-kafka")
        assert service["spec"]["type"] == "LoadBalancer"
        assert service["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == (
            f"folio-broker-{ordinal}")
        assert service["spec"]["ports"] == [{"name": "kafka", "port": 9094,
                                             "targetPort": "kafka"}]
        hostname = service["metadata"]["annotations"]["external-dns.alpha.kubernetes.io/hostname"]
        assert hostname == f"folio-broker-{ordinal}.kafka.example.com"
    first = _one(manifests, "Service", "folio-broker-0-kafka")["spec"]
    assert first["loadBalancerIP"] == "10.0.0.7"
    assert "loadBalancerIP" not in _one(manifests, "Service", "folio-broker-1-kafka")["spec"]


def test_external_node_port_per_broker_advertises_its_own_port(tmp_path: Path) -> None:
    """The NodePort variant: a Service per broker on nodePortBase + ordinal, and the
    container's shell line, as the kubelet expands it, appends that port (run here
    with `echo` in place of the image's `folio`)."""
    manifests = manifests_of(OPERATOR)
    for ordinal in range(2):
        service = _one(manifests, "Service", f"folio-broker-{ordinal}-kafka")
        assert service["spec"]["type"] == "NodePort"
        assert service["spec"]["ports"][0]["nodePort"] == 31090 + ordinal
    assert "--kafka-advertised-host=$(HOST_IP)" in _broker(manifests)["args"]
    cluster = LocalCluster(manifests, tmp_path, namespace=NAMESPACE,
                           external={"folio-zookeeper": {2181: "127.0.0.1:2181"}})
    try:
        for ordinal in range(2):
            (command,) = cluster.commands(f"folio-broker-{ordinal}")
            assert command.argv[:2] == ["/bin/sh", "-c"]
            assert command.argv[3] == "folio"
            echoed = subprocess.run(
                ["/bin/sh", "-c", command.argv[2], "echo", *command.argv[4:]],
                env=command.env, capture_output=True, text=True, timeout=30, check=False)
            assert echoed.returncode == 0, echoed.stderr
            words = echoed.stdout.split()
            assert words[0] == "broker"
            assert words[-1] == f"--kafka-advertised-port={31090 + ordinal}"
            assert "--kafka-advertised-host=127.0.0.1" in words
    finally:
        cluster.close()


def _advertised(manifests: list[Manifest], ordinal: int) -> list[str]:
    """Broker ``ordinal``'s arguments as its container's shell line, expanded as the kubelet
    expands it (``$(VAR)``, ``$$``), hands them to the image's `folio` (`echo` here)."""
    container = _broker(manifests)
    env = {"POD_NAME": f"folio-broker-{ordinal}", "POD_NAMESPACE": NAMESPACE,
           "HOST_IP": "10.1.2.3"}

    def kubelet(text: str) -> str:
        return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                      lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
                      text)
    argv = [kubelet(word) for word in [*container["command"], *container["args"]]]
    assert argv[:2] == ["/bin/sh", "-c"] and argv[3] == "folio"
    echoed = subprocess.run(["/bin/sh", "-c", argv[2], "echo", *argv[4:]], env=env,
                            capture_output=True, text=True, timeout=30, check=False)
    assert echoed.returncode == 0, echoed.stderr
    return echoed.stdout.split()


def _flag(words: list[str], name: str) -> str:
    (value,) = [w.partition("=")[2] for w in words if w.startswith(f"{name}=")]
    return value


def test_internal_and_external_listeners_each_broker_advertising_its_own_address() -> None:
    """ci/kafka-listeners-values.yaml: INTERNAL (PLAINTEXT, the pod's DNS name) and EXTERNAL
    (SASL_SSL, each broker's address from values) per broker, read by the broker's own
    listener parser (``parse_listeners``) from each pod's effective arguments."""
    manifests = manifests_of(ValueSet("kafka-listeners",
                                      CHART / "ci" / "kafka-listeners-values.yaml"))
    container = _broker(manifests)
    args = container["args"]
    assert "--kafka-listeners=INTERNAL://:9092,EXTERNAL://:9094" in args
    assert "--kafka-sasl-mechanisms=SCRAM-SHA-512" in args
    assert not [a for a in args if a.startswith(("--kafka-port", "--kafka-advertised",
                                                 "--kafka-security-protocol="))]
    assert {"name": "kafka-external", "containerPort": 9094} in container["ports"]
    for ordinal in range(2):
        service = _one(manifests, "Service", f"folio-broker-{ordinal}-kafka")["spec"]
        assert service["ports"] == [{"name": "kafka", "port": 9094,
                                     "targetPort": "kafka-external", "nodePort": 31090 + ordinal}]
        words = _advertised(manifests, ordinal)
        specs = parse_listeners(_flag(words, "--kafka-listeners"),
                                _flag(words, "--kafka-advertised-listeners"),
                                _flag(words, "--kafka-listener-security-protocol-map"), "0.0.0.0")
        told = {s.name: (s.protocol.value, s.port, s.advertised_host, s.advertised_port)
                for s in specs}
        pod = f"folio-broker-{ordinal}.folio-broker-headless.{NAMESPACE}.svc.cluster.local"
        assert told == {"INTERNAL": ("PLAINTEXT", 9092, pod, 9092),
                        "EXTERNAL": ("SASL_SSL", 9094, f"kafka-{ordinal}.example.com",
                                     19092 + ordinal)}
    # The client and headless Services (bootstrap, pod names) reach INTERNAL.
    client = _one(manifests, "Service", "folio")
    assert {"name": "kafka", "port": 9092, "targetPort": "kafka"} in client["spec"]["ports"]


@pytest.mark.parametrize(("values", "external"), [
    (["--set", "broker.kafka.external.type=LoadBalancer",
      "--set", "broker.kafka.external.domain=kafka.example.com"],
     "folio-broker-1.kafka.example.com:9094"),
    (["--set", "broker.kafka.external.host=nodes.example.com"], "nodes.example.com:31091"),
    ([], "10.1.2.3:31091"),  # the node's address (status.hostIP)
])
def test_an_own_external_listener_defaults_to_the_types_address(values: list[str],
                                                               external: str) -> None:
    manifests = manifests_of(ValueSet("own", None), extra=[
        "--set", "broker.kafka.enabled=true", *_OWN, *values])
    words = _advertised(manifests, 1)
    assert _flag(words, "--kafka-advertised-listeners") == (
        f"INTERNAL://folio-broker-1.folio-broker-headless.{NAMESPACE}.svc.cluster.local:9092,"
        f"EXTERNAL://{external}")
    assert _flag(words, "--kafka-listener-security-protocol-map") == (
        "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT")


def test_a_shared_listener_takes_each_brokers_address_from_values() -> None:
    """external.listener shared (the default) with ``advertised``: the one listener is
    advertised at broker i's entry."""
    manifests = manifests_of(ValueSet("shared", None), extra=[
        "--set", "broker.kafka.enabled=true", "--set", "broker.kafka.external.enabled=true",
        "--set-json", 'broker.kafka.external.advertised=[{"host": "k0.example.com", "port": 1},'
        ' {"host": "k1.example.com", "port": 2}]'])
    for ordinal in range(2):
        words = _advertised(manifests, ordinal)
        assert "--kafka-port=9092" in words
        assert _flag(words, "--kafka-advertised-host") == f"k{ordinal}.example.com"
        assert _flag(words, "--kafka-advertised-port") == str(ordinal + 1)
