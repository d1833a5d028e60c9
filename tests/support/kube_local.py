"""Run a rendered Helm chart's pods as local processes on loopback, as a kubelet would.

No cluster can run here, so ``LocalCluster`` does the part of Kubernetes the
chart's wiring depends on, from the rendered objects only:

- **pods**: each StatefulSet's ``replicas`` pods are named ``<set>-<ordinal>``,
  a Job's pod ``<job>-0``; a container's command is its ``command`` or the image's
  entry point (``folio``, run here as ``python -m folio.cli``) plus its ``args``;
- **environment**: ``value`` and the downward API's ``metadata.name`` /
  ``metadata.namespace`` / ``status.hostIP`` (127.0.0.1); ``$(VAR)`` in
  arguments expanded as the kubelet does; a container whose command runs the
  image's ``folio`` through a shell finds this checkout's on its ``PATH``;
- **volumes**: each mount is a directory of this test (a claim template's
  directory per pod; a ConfigMap's files written out; a Secret's keys, given
  by the test as ``secrets``, written out, ``items`` followed; emptyDir), and
  paths in arguments under a mount path point into it;
- **DNS**: every name a pod or Service has (``<pod>.<headless service>``,
  ``.<namespace>``, ``.svc``, ``.svc.<cluster domain>``; ``<service>...``) with
  each of its ports maps to a port on 127.0.0.1: a pod's container ports to
  free ports its process listens on (its ``--port=N``-style arguments
  rewritten, ``0.0.0.0`` made ``127.0.0.1``, a ``--...-host=`` naming a pod
  made ``127.0.0.1``), a ClusterIP Service's port to a real
  TCP proxy (tests/support/proxy.py) in front of a selected pod, and the pods of
  ``external`` workloads (ZooKeeper, played by the test's server) to a proxy
  each in front of the address given. An argument still naming a cluster DNS name after the
  rewriting is a wiring error of the chart: ``UnmappedNameError``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.proxy import TcpProxy
from tests.support.zookeeper import free_port

__all__ = ["Command", "LocalCluster", "Pod", "UnmappedNameError", "free_port"]

Manifest = dict[str, Any]

#: The Folio image's entry point, run from this checkout instead.
FOLIO_ENTRYPOINT = [sys.executable, "-m", "folio.cli"]
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\$")
_HOST_PORT = re.compile(r"(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(?P<port>\d{1,5})\b")
_PORT_FLAG = re.compile(r"^(?P<flag>--[a-z-]*port)=(?P<port>\d+)$")
_HOST_FLAG = re.compile(r"^(?P<flag>--[a-z-]*host)=(?P<host>[A-Za-z0-9.-]+)$")


class UnmappedNameError(AssertionError):
    """An argument names a cluster DNS name no rendered pod or Service has."""


@dataclass
class Pod:
    """One pod of a workload: its name, template, and the local ports of its container ports."""

    name: str
    workload: Manifest
    template: Manifest
    ordinal: int
    ports: dict[int, int] = field(default_factory=dict)

    @property
    def labels(self) -> dict[str, str]:
        """The template's labels, and the pod-name label a StatefulSet's pods get."""
        labels: dict[str, str] = dict(self.template["metadata"].get("labels", {}))
        if self.workload["kind"] == "StatefulSet":
            labels["statefulset.kubernetes.io/pod-name"] = self.name
        return labels

    @property
    def containers(self) -> list[Manifest]:
        containers: list[Manifest] = self.template["spec"]["containers"]
        return containers

    def container_port(self, port: int | str) -> int:
        """A container port given by number or by name."""
        for container in self.containers:
            for spec in container.get("ports", []):
                if port in (spec["containerPort"], spec.get("name")):
                    number: int = spec["containerPort"]
                    return number
        raise KeyError(f"pod {self.name} has no container port {port!r}")


@dataclass(frozen=True)
class Command:
    """A container as a local process.

    Attributes:
        pod, container: whose it is.
        argv: the command line to run here (the image's entry point made
            ``python -m folio.cli`` unless the container gives a command).
        env: the container's environment (names mapped).
        args: ``argv`` without that entry point: what follows the image's.
        mounts: ``(mount path, directory here)`` of each volume mount; with
            ``bind_mounts`` the paths in ``argv`` are left as written, for a
            runner that binds the directories there (``buildah run --volume``).
    """

    pod: str
    container: str
    argv: list[str]
    env: dict[str, str]
    args: list[str]
    mounts: list[tuple[str, Path]]


class LocalCluster:
    """The rendered objects of one namespace, mapped onto loopback (see the module docstring).

    Args:
        manifests: ``helm template`` output, parsed.
        root: directory for the pods' volumes.
        namespace: the namespace the chart was rendered for.
        cluster_domain: the chart's ``clusterDomain``.
        external: ``{workload name: {container port: "host:port"}}``: pods played
            by something else (ZooKeeper by the test's server): each pod's port gets a
            proxy of its own to that address; their other ports stay unmapped.
        secrets: ``{Secret name: {key: content}}``: what the cluster's Secrets
            would hold (a Secret volume naming one not given is an error).
    """

    def __init__(self, manifests: Sequence[Manifest], root: Path, *, namespace: str,
                 cluster_domain: str = "cluster.local",
                 external: Mapping[str, Mapping[int, str]] | None = None,
                 bind_mounts: bool = False,
                 secrets: Mapping[str, Mapping[str, bytes]] | None = None) -> None:
        self.bind_mounts = bind_mounts
        self.secrets = dict(secrets or {})
        self.manifests = list(manifests)
        self.root = root
        self.namespace = namespace
        self.domain = cluster_domain
        self.external = dict(external or {})
        self.pods: dict[str, Pod] = {}
        self.names: dict[tuple[str, int], str] = {}
        self.proxies: list[TcpProxy] = []
        self._build_pods()
        self._map_pods()
        self._map_services()

    def close(self) -> None:
        """Close the Services' proxies."""
        for proxy in self.proxies:
            proxy.close()

    # --- objects -------------------------------------------------------------------------

    def objects(self, kind: str) -> list[Manifest]:
        return [m for m in self.manifests if m["kind"] == kind]

    def one(self, kind: str, name: str) -> Manifest:
        found = [m for m in self.objects(kind) if m["metadata"]["name"] == name]
        assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
        return found[0]

    def pods_of(self, workload: str) -> list[Pod]:
        return sorted((p for p in self.pods.values() if p.workload["metadata"]["name"] == workload),
                      key=lambda pod: pod.ordinal)

    def _build_pods(self) -> None:
        for workload in self.objects("StatefulSet"):
            for ordinal in range(int(workload["spec"].get("replicas", 1))):
                name = f"{workload['metadata']['name']}-{ordinal}"
                self.pods[name] = Pod(name, workload, workload["spec"]["template"], ordinal)
        for job in self.objects("Job"):
            name = f"{job['metadata']['name']}-0"
            self.pods[name] = Pod(name, job, job["spec"]["template"], 0)
        assert not self.objects("Deployment"), "Deployments: give their pods stable names first"

    # --- DNS -----------------------------------------------------------------------------

    def _dns_names(self, *labels: str) -> list[str]:
        base = ".".join(labels)
        return [base, f"{base}.{self.namespace}", f"{base}.{self.namespace}.svc",
                f"{base}.{self.namespace}.svc.{self.domain}"]

    def _map_pods(self) -> None:
        for pod in self.pods.values():
            external = self.external.get(pod.workload["metadata"]["name"])
            service = pod.workload["spec"].get("serviceName")
            for container in pod.containers:
                for spec in container.get("ports", []):
                    port = spec["containerPort"]
                    if external is None:
                        pod.ports[port] = free_port()
                    elif port in external:
                        # A proxy per pod, so each pod keeps an address of its own.
                        host, target_port = external[port].rsplit(":", 1)
                        proxy = TcpProxy(host, int(target_port))
                        self.proxies.append(proxy)
                        pod.ports[port] = int(proxy.address.rsplit(":", 1)[1])
                    else:
                        continue
                    if service:
                        for name in self._dns_names(pod.name, service):
                            self.names[(name, port)] = f"127.0.0.1:{pod.ports[port]}"

    def _map_services(self) -> None:
        for service in self.objects("Service"):
            if service["spec"].get("clusterIP") == "None":
                continue
            selector = service["spec"]["selector"]
            selected = [p for p in self.pods.values()
                        if all(p.labels.get(k) == v for k, v in selector.items())]
            assert selected, f"Service/{service['metadata']['name']} selects no pod"
            pod = min(selected, key=lambda p: p.ordinal)
            for spec in service["spec"]["ports"]:
                target_port = pod.container_port(spec.get("targetPort", spec["port"]))
                proxy = TcpProxy("127.0.0.1", pod.ports[target_port])
                self.proxies.append(proxy)
                for name in self._dns_names(service["metadata"]["name"]):
                    self.names[(name, spec["port"])] = proxy.address

    def resolve(self, name: str, port: int) -> str:
        """The loopback ``host:port`` of a cluster name and port."""
        try:
            return self.names[(name, port)]
        except KeyError:
            raise UnmappedNameError(f"{name}:{port} is no rendered pod or Service") from None

    def service_address(self, name: str) -> str:
        """The proxy address of a ClusterIP Service's first port."""
        service = self.one("Service", name)
        return self.resolve(name, service["spec"]["ports"][0]["port"])

    # --- commands ------------------------------------------------------------------------

    def commands(self, pod_name: str) -> list[Command]:
        """Each container of the pod as a local process (volumes made, names mapped)."""
        pod = self.pods[pod_name]
        mounts_root = self.root / pod.name
        return [self._command(pod, container, mounts_root) for container in pod.containers]

    def _command(self, pod: Pod, container: Manifest, mounts_root: Path) -> Command:
        env = self._env(pod, container)
        mounts = self._mounts(pod, container, mounts_root)
        args = [self._expand(arg, env) for arg in [*container.get("command", []),
                                                   *container.get("args", [])]]
        rewritten = [] if self.bind_mounts else mounts
        args = [self._rewrite(pod, arg, rewritten) for arg in args]
        env = {key: self._rewrite(pod, value, rewritten) for key, value in env.items()}
        argv = args if container.get("command") else [*FOLIO_ENTRYPOINT, *args]
        if "folio" in container.get("command", []):
            # The image's `folio` named by a shell command: this checkout's.
            env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        return Command(pod.name, container["name"], argv, env, args, mounts)

    def _env(self, pod: Pod, container: Manifest) -> dict[str, str]:
        env: dict[str, str] = {}
        fields = {"metadata.name": pod.name, "metadata.namespace": self.namespace,
                  "status.hostIP": "127.0.0.1"}
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = self._expand(str(item["value"]), env)
            else:
                path = item["valueFrom"]["fieldRef"]["fieldPath"]
                env[item["name"]] = fields[path]
        return env

    @staticmethod
    def _expand(text: str, env: Mapping[str, str]) -> str:
        """``$(VAR)`` as the kubelet expands it (unknown ones stay as written, ``$$`` is ``$``)."""
        def one(match: re.Match[str]) -> str:
            if match.group(0) == "$$":
                return "$"
            return env.get(match.group(1), match.group(0))
        return _VAR.sub(one, text)

    def _mounts(self, pod: Pod, container: Manifest, root: Path) -> list[tuple[str, Path]]:
        volumes = {v["name"]: v for v in pod.template["spec"].get("volumes", [])}
        claims = {c["metadata"]["name"] for c in pod.workload["spec"].get("volumeClaimTemplates",
                                                                           [])}
        mounts = []
        for mount in container.get("volumeMounts", []):
            name = mount["name"]
            if name in claims:
                directory = self.root / "claims" / f"{name}-{pod.name}"
            else:
                directory = root / name
                volume = volumes[name]
                if "configMap" in volume:
                    self._write_config_map(volume["configMap"]["name"], directory, pod)
                elif "secret" in volume:
                    self._write_secret(volume["secret"], directory, pod)
                elif "emptyDir" not in volume:
                    raise AssertionError(f"pod {pod.name}: volume {name}: only claims, "
                                         f"ConfigMaps, Secrets and emptyDirs run here")
            directory.mkdir(parents=True, exist_ok=True)
            mounts.append((mount["mountPath"].rstrip("/"), directory))
        return sorted(mounts, key=lambda m: -len(m[0]))

    def _write_config_map(self, name: str, directory: Path, pod: Pod) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for key, text in self.one("ConfigMap", name).get("data", {}).items():
            (directory / key).write_text(self._map_names(text))

    def _write_secret(self, volume: Manifest, directory: Path, pod: Pod) -> None:
        name = volume["secretName"]
        data = self.secrets.get(name)
        if data is None:
            raise AssertionError(f"pod {pod.name}: Secret {name} is not given to this cluster")
        items = volume.get("items") or [{"key": key, "path": key} for key in data]
        directory.mkdir(parents=True, exist_ok=True)
        for item in items:
            if item["key"] not in data:
                raise AssertionError(f"pod {pod.name}: Secret {name} has no key {item['key']}")
            (directory / item["path"]).write_bytes(data[item["key"]])

    def _rewrite(self, pod: Pod, arg: str, mounts: Iterable[tuple[str, Path]]) -> str:
        """One argument with mount paths, its own ports and cluster names made local."""
        flag = _PORT_FLAG.match(arg)
        if flag and int(flag["port"]) in pod.ports:
            return f"{flag['flag']}={pod.ports[int(flag['port'])]}"
        host = _HOST_FLAG.match(arg)
        if host and any(name == host["host"] for name, _ in self.names):
            return f"{host['flag']}=127.0.0.1"
        arg = arg.replace("0.0.0.0", "127.0.0.1")
        # One pass over every mount path (longest first), so a replaced path is
        # never matched again by a shorter mount (/tmp after /etc/... -> /tmp/...).
        directories = dict(mounts)
        if directories:
            paths = "|".join(re.escape(path) for path in directories)
            arg = re.sub(rf"(^|=|,)({paths})(?=/|$)",
                         lambda m: f"{m.group(1)}{directories[m.group(2)]}", arg)
        arg = self._map_names(arg)
        if f".{self.namespace}.svc" in arg:
            raise UnmappedNameError(f"pod {pod.name}: {arg!r} names a cluster address that no "
                                    f"rendered pod or Service has")
        return arg

    def _map_names(self, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            return self.names.get((match["host"], int(match["port"])), match.group(0))
        return _HOST_PORT.sub(one, text)

    def workload_names(self, kind: str) -> Iterator[str]:
        for manifest in self.objects(kind):
            yield manifest["metadata"]["name"]
