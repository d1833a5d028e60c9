"""The two faces of one core: a core coroutine as a blocking or an awaiting method.

(And ``forward``: a part's method shown as a face's own.)

The SDK's admin calls are written once, as coroutines of ``folio.admin.AdminCore``.
``folio.Client`` shows each as a blocking method (``blocking``: the coroutine runs
on the client's IO thread and the caller waits), ``folio.aio.AsyncClient`` as a
coroutine method on the caller's loop (``awaiting``). Both keep the core method's
signature (checked by mypy through ``ParamSpec``) and docstring, so the two faces
cannot drift apart.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

if TYPE_CHECKING:
    from folio.admin import AdminCore

__all__ = ["AdminFace", "AwaitingFace", "BlockingFace", "awaiting", "blocking", "forward"]

P = ParamSpec("P")
R = TypeVar("R")
Part = TypeVar("Part")


class AdminFace(Protocol):
    """What a face holds: the core its methods call."""

    @property
    def _admin(self) -> AdminCore: ...


class AwaitingFace(AdminFace, Protocol):
    """A face on one event loop (``folio.aio.AsyncClient``): it refuses calls from another."""

    def _check_loop(self) -> None: ...


class BlockingFace(AdminFace, Protocol):
    """A face that can wait for a core coroutine (``folio.Client``: on its IO thread)."""

    def _run(self, coro: Coroutine[Any, Any, R]) -> R: ...


def blocking(core: Callable[Concatenate[AdminCore, P], Coroutine[Any, Any, R]],
             ) -> Callable[Concatenate[BlockingFace, P], R]:
    """``core`` as a blocking method: runs it (``_run``) and returns its result."""
    @functools.wraps(core)
    def method(self: BlockingFace, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._run(core(self._admin, *args, **kwargs))
    return method


def awaiting(core: Callable[Concatenate[AdminCore, P], Coroutine[Any, Any, R]],
             ) -> Callable[Concatenate[AwaitingFace, P], Coroutine[Any, Any, R]]:
    """``core`` as a coroutine method of the face (on the face's loop, checked)."""
    @functools.wraps(core)
    async def method(self: AwaitingFace, /, *args: P.args, **kwargs: P.kwargs) -> R:
        self._check_loop()
        return await core(self._admin, *args, **kwargs)
    return method


def forward(method: Callable[Concatenate[Part, P], R], part: str,
            ) -> Callable[Concatenate[Any, P], R]:
    """``method`` of the part held in attribute ``part`` as a method of the face.

    A face shows a part's calls as its own (``folio.Client``'s reader groups are
    ``folio._client_groups.GroupCalls``') with the part's signature and docstring,
    instead of inheriting them.
    """
    @functools.wraps(method)
    def delegated(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(getattr(self, part), *args, **kwargs)
    return delegated

