"""What a call needs: ``Need``, shared by the permission tables of the front ends."""

from __future__ import annotations

from enum import Enum

from broker.auth.permissions import Action

__all__ = ["Need"]


class Need(Enum):
    """What a call needs, beyond a valid token."""

    PRODUCE = "produce"
    CONSUME = "consume"
    ADMIN = "admin"
    #: Any permission on the resource (look a topic up before writing or reading it).
    LOOKUP = "lookup"
    #: Nothing more (``rpc_table``'s docstring says which rows and why).
    AUTHENTICATED = "authenticated"
    #: A super-user role.
    SUPER_USER = "super-user"

    @property
    def action(self) -> Action | None:
        """The grant action this need is, if it is one."""
        return {Need.PRODUCE: Action.PRODUCE, Need.CONSUME: Action.CONSUME,
                Need.ADMIN: Action.ADMIN}.get(self)

