"""The SDK's one append-flow engine and the contract its policies implement.

A *flow* (PDP-36) is one writer's appends to one segment over an Append
stream shared with other flows. Every writer of the SDK appends through one
:class:`~folio._flow.engine.FlowEngine`, which owns what every flow does the
same way: its state and the state table (``folio._transport.flow_state``),
registration on a stream, ``SetupAppend`` and numbering from its answer,
routing replies, resending what was not acknowledged after a lost stream, a
retriable refusal or a move, following ``WrongHost`` to a segment's owner,
and the ticks that drive deadlines. A *policy*
(:class:`~folio._flow.policy.FlowPolicy`) says what differs between writers:
which units go out together and how many may be outstanding (back-pressure),
how a unit is framed into ``AppendBlock`` commands, how an answer settles
it, which refusals end the flow, and when a unit gives up. The three
policies:

- ``folio.write._segment_flow.SegmentFlow``: an event writer's blocks,
  pipelined, each with a delivery deadline; a seal hands the blocks not
  written to the successor segments.
- ``folio.txn._txn_flow.TxnFlow``: a single-routing-key transaction
  writer's commits, one sequence of held blocks at a time (PDP-44).
- ``folio.txn._full_flow.SegmentFlow``: one full transaction's blocks to one
  segment, pipelined up to a window, under the transaction's id.

Each is *held* by its writer (composition): the writer packs events on the
caller's side and hands units to its flow on the event loop.

The engine runs on whichever ``asyncio`` loop its stream runs on (the
blocking face's IO thread, or an asyncio caller's own loop); nothing here
knows the IO thread.
"""

from folio._flow.engine import FlowEngine
from folio._flow.policy import FlowPolicy, FlowUnit

__all__ = ["FlowEngine", "FlowPolicy", "FlowUnit"]
