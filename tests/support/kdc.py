"""A real MIT Kerberos KDC for tests: one realm in a temp dir, principals, keytabs and tickets.

``Kdc(root)`` writes a ``krb5.conf`` and a ``kdc.conf`` of its own under
``root`` (realm ``FOLIO.TEST``, the KDC on a free loopback port, no DNS
look-ups), makes the database with ``kdb5_util create -s`` and runs
``krb5kdc -n`` in the foreground; ``start`` waits for its TCP port with a
deadline, ``stop`` terminates it (SIGKILL after a grace), as
``tests/support/zookeeper.py``'s server. Nothing reads or writes the
machine's ``/etc/krb5.conf``, its keytab or its credential caches: every
command and every client the tests start get ``env()`` (``KRB5_CONFIG``,
``KRB5_KDC_PROFILE``, a replay cache directory under ``root``) and their
own ``KRB5CCNAME``.

``add_principal`` makes a principal with a random key, ``keytab`` exports
principals' keys to a keytab (``kadmin.local ktadd``), ``kinit`` gets a
ticket-granting ticket from a keytab into a credential cache of its own.
Needs the Debian packages ``krb5-kdc``, ``krb5-admin-server`` and
``krb5-user`` (``.ci/run`` installs them). The realm allows 1 s of clock
skew (MIT's default is 5 minutes), so a ticket that ended is refused at once.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(_ROOT / "scripts"))

from free_ports import free_port  # noqa: E402

from tests.support.wait import wait_for  # noqa: E402

__all__ = ["REALM", "Kdc", "running_kdc"]

REALM = "FOLIO.TEST"
#: Deadline for the KDC to listen, and for each admin command.
START_TIMEOUT_S = 30.0
_MASTER_PASSWORD = "folio-test-master-password"


def _command(name: str) -> str:
    """``name``'s path: on PATH, else in /usr/sbin (the KDC's commands live there)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin") or name


class Kdc:
    """One MIT KDC of realm ``REALM`` with its database, configuration and logs under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.krb5_conf = root / "krb5.conf"
        self.kdc_conf = root / "kdc.conf"
        self._process: subprocess.Popen[bytes] | None = None
        self._log = root / "krb5kdc.log"
        (root / "rcache").mkdir(parents=True, exist_ok=True)
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {REALM}\n"
            "  dns_lookup_kdc = false\n  dns_lookup_realm = false\n"
            "  dns_canonicalize_hostname = false\n  rdns = false\n"
            "  udp_preference_limit = 1\n"  # TCP to the KDC: the port waited on
            "  clockskew = 1\n"  # an expired ticket is refused within a second
            "[realms]\n"
            f"  {REALM} = {{\n    kdc = 127.0.0.1:{self.port}\n  }}\n"
            "[domain_realm]\n"
            f"  localhost = {REALM}\n")
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            f"  kdc_ports = {self.port}\n  kdc_tcp_ports = {self.port}\n"
            "[realms]\n"
            f"  {REALM} = {{\n"
            f"    database_name = {root / 'principal'}\n"
            f"    key_stash_file = {root / 'stash'}\n"
            f"    acl_file = {root / 'kadm5.acl'}\n"
            "    max_life = 1h\n    max_renewable_life = 0\n"
            "  }\n"
            "[logging]\n"
            f"  kdc = FILE:{self._log}\n")

    def env(self, ccache: Path | None = None) -> dict[str, str]:
        """The environment of a Kerberos command or client of this realm (and ``ccache``)."""
        env = {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf),
               "KRB5RCACHEDIR": str(self.root / "rcache"),
               "KRB5CCNAME": f"FILE:{ccache or self.root / 'no-ccache'}"}
        return {**os.environ, **env}

    def _run(self, *argv: str, ccache: Path | None = None) -> str:
        done = subprocess.run([_command(argv[0]), *argv[1:]], env=self.env(ccache),
                              capture_output=True, text=True, timeout=START_TIMEOUT_S,
                              check=False)
        assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout}{done.stderr}"
        return done.stdout

    def start(self) -> None:
        """Make the database and run the KDC; return once its port accepts connections."""
        self._run("kdb5_util", "create", "-s", "-r", REALM, "-P", _MASTER_PASSWORD)
        log = (self.root / "krb5kdc.out").open("wb")
        self._process = subprocess.Popen([_command("krb5kdc"), "-n", "-r", REALM], env=self.env(),
                                         stdout=log, stderr=subprocess.STDOUT)
        log.close()
        wait_for(self._listening, f"krb5kdc listening on {self.port}", START_TIMEOUT_S)

    def _listening(self) -> bool:
        """Whether the KDC's port accepts a connection (it must not have exited)."""
        assert self._process is not None and self._process.poll() is None, (
            f"krb5kdc exited: {(self.root / 'krb5kdc.out').read_text()}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def stop(self) -> None:
        """Terminate the KDC (killed if it does not exit in time)."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def add_principal(self, name: str) -> str:
        """Make ``name`` (``user`` or ``service/host``) with a random key; ``name@REALM``."""
        self._run("kadmin.local", "-r", REALM, "-q", f"addprinc -randkey {name}")
        return f"{name}@{REALM}"

    def keytab(self, path: Path, *names: str) -> Path:
        """Export the keys of ``names`` to the keytab ``path`` (keys kept as they are)."""
        for name in names:
            self._run("kadmin.local", "-r", REALM, "-q", f"ktadd -norandkey -k {path} {name}")
        return path

    def kinit(self, name: str, keytab: Path, ccache: Path, lifetime: str = "") -> Path:
        """A ticket-granting ticket of ``name`` (from ``keytab``) in the cache ``ccache``.

        ``lifetime``: kinit's ``-l`` (``2s``: a ticket that ends at once); the
        realm's own by default (1 h).
        """
        life = ("-l", lifetime) if lifetime else ()
        self._run("kinit", *life, "-k", "-t", str(keytab), f"{name}@{REALM}", ccache=ccache)
        return ccache


def running_kdc(root: Path) -> Iterator[Kdc]:
    """A started KDC under ``root``, stopped when the generator closes (a module fixture's body)."""
    made = Kdc(root)
    try:
        made.start()
        yield made
    finally:
        made.stop()
