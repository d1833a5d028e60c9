"""Authorisation in the broker: who may do what to which topic or reader group.

Authentication (who the caller is) is ``ledger.security``'s: a JWT checked
once per call or stream by ``AuthInterceptor``. This package decides what
the authenticated role may do:

- ``permissions``: the model. A **grant** gives a role actions (``produce``,
  ``consume``, ``admin``) on a topic or a reader group, named exactly or by
  prefix (``orders.*``; ``*`` is every name). ``AclTable`` answers "may role R
  do A on resource X?" from an immutable snapshot.
- ``acl_store``: the grants, kept in the ``MetadataStore`` (one versioned
  node, changed by compare-and-set), so every broker of a cluster sees the
  same ones; a watch keeps each broker's snapshot current.
- ``rpc_table``: THE table: every RPC of the public API and the permission it
  needs on which resource. A test enumerates the services from the proto
  descriptors and fails on any RPC missing here.
- ``access``: THE check, transport-neutral: may role R do what a ``Need``
  says on topic or group X? The gRPC rows and the Kafka handlers
  (``broker.kafka.access``) both ask it.
- ``authorizer``: wraps each call's handler to enforce its row; the Append
  stream is checked once per flow (at its ``SetupAppend``), never per block.

Super-users (``--super-users``) may do everything. Without token
authentication none of this runs.
"""

from broker.auth.access import Access, Need
from broker.auth.acl_store import AclStore
from broker.auth.authorizer import Authorizer, setup_check
from broker.auth.permissions import AclTable, Action, Grant, ResourceKind

__all__ = ["Access", "AclStore", "AclTable", "Action", "Authorizer", "Grant", "Need",
           "ResourceKind", "setup_check"]
